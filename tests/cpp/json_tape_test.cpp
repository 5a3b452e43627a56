// The one JSON scanner (the tape, cpp/src/json/json_tape.cpp): what it takes
// (comments, a byte order mark, escapes), how it refuses (limits with a JSON
// path, syntax errors in nlohmann's words), and the byte offsets migrate's
// spans are read from.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "json/json_tape.hpp"
#include "ukdpack/json/json_spans.hpp"
#include "ukdpack/json/json_text.hpp"

using ukdpack::Json;
using ukdpack::JsonSpan;
using ukdpack::detail::JsonNode;
using ukdpack::detail::JsonTape;

namespace {

std::unique_ptr<JsonTape> scan(const std::string& text) {
  return JsonTape::scan(std::make_shared<const std::string>(text));
}

// What the reader says of `text`: "ok <dump>" or "CODE | path | message".
std::string verdict(const std::string& text) {
  const auto r = ukdpack::parseDescriptorText(text);
  if (r) return "ok " + r.value().dump();
  return r.error().code + " | " + r.error().jsonPath + " | " + r.error().message;
}

std::vector<JsonSpan> spansOf(std::string_view text) {
  auto r = ukdpack::jsonSpans(text);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().str());
  return r.ok() ? r.value() : std::vector<JsonSpan>{};
}

const JsonSpan* find(const std::vector<JsonSpan>& spans, const std::string& path) {
  for (const JsonSpan& s : spans)
    if (s.path == path) return &s;
  return nullptr;
}

std::string_view slice(std::string_view text, std::size_t b, std::size_t e) { return text.substr(b, e - b); }

}  // namespace

TEST(JsonSpans, PathsInDocumentOrderWithNesting) {
  const std::string text = R"({"a": {"b": [1, {"c": null}], "odd key": true}, "d": "x"})";
  const auto spans = spansOf(text);
  std::vector<std::string> paths;
  for (const auto& s : spans) paths.push_back(s.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"$", "$.a", "$.a.b", "$.a.b[0]", "$.a.b[1]", "$.a.b[1].c",
                                             "$.a[\"odd key\"]", "$.d"}));
  EXPECT_EQ(slice(text, find(spans, "$.a.b")->begin, find(spans, "$.a.b")->end), "[1, {\"c\": null}]");
  EXPECT_EQ(slice(text, find(spans, "$.a.b[1].c")->begin, find(spans, "$.a.b[1].c")->end), "null");
  EXPECT_EQ(find(spans, "$")->begin, 0u);
  EXPECT_EQ(find(spans, "$")->end, text.size());
  const JsonSpan* d = find(spans, "$.d");
  EXPECT_TRUE(d->member);
  EXPECT_EQ(slice(text, d->keyBegin, d->keyEnd), "\"d\"");
  EXPECT_TRUE(d->inlineStart);
  EXPECT_FALSE(find(spans, "$.a.b[0]")->member);
}

TEST(JsonSpans, CommentsAndEscapedQuotesAreSteppedOver) {
  const std::string text =
      "// a leading comment { \"not\": 1 }\n"
      "{\n"
      "  \"name\": \"say \\\"hi\\\" /* not a comment */\", // trailing }\n"
      "  /* a block\n     comment \"with quotes\" ] */\n"
      "  \"arch\": [\"gfx90a\" /* x */, \"gfx940\"],\n"
      "\t\"q\\\"k\": 12/*c*/\n"
      "}\n";
  const auto spans = spansOf(text);
  ASSERT_EQ(spans.size(), 6u);
  const JsonSpan* name = find(spans, "$.name");
  ASSERT_NE(name, nullptr);
  EXPECT_EQ(slice(text, name->begin, name->end), "\"say \\\"hi\\\" /* not a comment */\"");
  EXPECT_EQ(name->indent, "  ");
  EXPECT_FALSE(name->inlineStart);
  const JsonSpan* arch = find(spans, "$.arch");
  ASSERT_NE(arch, nullptr);
  EXPECT_EQ(slice(text, arch->keyBegin, arch->keyEnd), "\"arch\"");
  EXPECT_EQ(slice(text, arch->begin, arch->end), "[\"gfx90a\" /* x */, \"gfx940\"]");
  EXPECT_EQ(slice(text, find(spans, "$.arch[1]")->begin, find(spans, "$.arch[1]")->end), "\"gfx940\"");
  const JsonSpan* q = find(spans, "$[\"q\\\"k\"]");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(slice(text, q->begin, q->end), "12");
  EXPECT_EQ(q->indent, "\t");
}

// Spans come in the order written, not the tape's key order.
TEST(JsonSpans, FollowTheDocumentNotTheKeyOrder) {
  const std::string text = "{\"z\": 1, \"b\": {\"y\": 2, \"x\": 3}, \"a\": [4]}";
  std::vector<std::string> paths;
  for (const auto& s : spansOf(text)) paths.push_back(s.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"$", "$.z", "$.b", "$.b.y", "$.b.x", "$.a", "$.a[0]"}));
}

TEST(JsonSpans, ByteOffsetsCountUtf8AndTheBom) {
  const std::string text = "\xEF\xBB\xBF{\"\xC3\xA9t\xC3\xA9\": \"\xE2\x82\xAC\"}";
  const auto spans = spansOf(text);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].begin, 3u);
  EXPECT_EQ(spans[1].path, "$[\"\xC3\xA9t\xC3\xA9\"]");
  EXPECT_EQ(slice(text, spans[1].begin, spans[1].end), "\"\xE2\x82\xAC\"");
}

TEST(JsonSpans, WhatTheReaderRefusesIsRefusedWithItsDiagnostic) {
  auto dup = ukdpack::jsonSpans(R"({"a": 1, "a": 2})");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().code, "DUPLICATE_KEY");
  auto broken = ukdpack::jsonSpans("{\"a\": [1, }");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().code, "JSON_SYNTAX");
}

// The reader ends a `//` comment at a lone CR too: the next value is no part of it
// (it was, for a scanner of its own, and a migrate insert landed in another kernel).
TEST(JsonSpans, ALoneCrEndsALineCommentAsTheReaderSays) {
  const std::string text = "{\"k\": [1, // one\r 2, 3],\r\t\"z\": 4}";
  const auto spans = spansOf(text);
  std::vector<std::string> paths;
  for (const auto& s : spans) paths.push_back(s.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"$", "$.k", "$.k[0]", "$.k[1]", "$.k[2]", "$.z"}));
  EXPECT_EQ(slice(text, find(spans, "$.k[1]")->begin, find(spans, "$.k[1]")->end), "2");
  EXPECT_EQ(find(spans, "$.z")->indent, "\t");  // a CR starts a line
  EXPECT_FALSE(find(spans, "$.z")->inlineStart);
}

// Comments and a byte order mark are read on the tape, as nlohmann's parser
// with comments on reads them (the scan once left them to a DOM parse).
TEST(JsonTape, TakesCommentsAndAByteOrderMarkAsNlohmannDoes) {
  const std::vector<std::string> texts = {
      "// c\n{}",
      "{} /* c */",
      "\xEF\xBB\xBF{}",
      "{\"a\": /* x */ 1 // y\r}",
      "{\"a\": [1, 2] /* c */, // d\n \"b\": {\"c\": \"\\\"/\\\\\\/\\b\\f\\n\\r\\t\"}}",
      "{\"a\": 1 /* * / **/ }",
      "{\"a\": 1 /**/}",
      std::string("//c\0{}", 6),               // a NUL ends a // comment
      std::string("[1, 2 // x\0 , 3]", 16),    // ... and reading goes on after it
      std::string("{\"a\":1}\0trailing", 16),  // a NUL where a token may start ends the text
  };
  for (const std::string& text : texts) {
    const auto tape = scan(text);
    ASSERT_TRUE(tape) << text;
    const Json theirs = Json::parse(text.begin(), text.end(), nullptr, true, /*ignore_comments=*/true);
    EXPECT_EQ(tape->root().toJson(), theirs) << text;
    EXPECT_EQ(verdict(text), "ok " + theirs.dump()) << text;
  }
  // A value's bytes are its own: the BOM and the comments around it are not.
  const auto bom = scan("\xEF\xBB\xBF /* c */ {\"a\": 1} // d");
  ASSERT_TRUE(bom);
  EXPECT_EQ(ukdpack::detail::textOf(bom->root()).text(), "{\"a\": 1}");
  // A value written with a comment inside reads again (JsonText::json, as a kernel's raw).
  const auto inner = scan("{\"k\": {\"a\": /* c */ 1 // d\n}}");
  ASSERT_TRUE(inner);
  EXPECT_EQ(ukdpack::detail::textOf(*inner->root().find("k")).json(), Json({{"a", 1}}));
}

// A comment the parser refuses, and a NUL inside a block comment or a value,
// are syntax errors in nlohmann's words (pinned: the old DOM reader's).
TEST(JsonTape, RefusedCommentsAreWordedAsNlohmannWordsThem) {
  const std::string syntax = "JSON_SYNTAX |  | ";
  EXPECT_EQ(verdict("{} /"), syntax +
                                 "not valid JSON: syntax error while parsing value - invalid comment; expecting '/' "
                                 "or '*' after '/'; last read: '{} /'; expected end of input at line 1 column 5");
  EXPECT_EQ(verdict("{\"a\": 1 /* never closed\n}"), syntax + "unterminated /* comment starting on line 1");
  EXPECT_EQ(verdict(std::string("/*\0*/{}", 7)),
            syntax +
                "not valid JSON: syntax error while parsing value - invalid comment; missing closing '*/'; "
                "last read: '/*<U+0000>' at line 1 column 3");
  EXPECT_EQ(verdict(std::string("{\"a\": 1\0}", 9)),
            syntax +
                "not valid JSON: syntax error while parsing object - unexpected end of input; expected '}' at "
                "line 1 column 8");
  EXPECT_EQ(verdict("\xEF\xBB\xBF\xEF\xBB\xBF{}"),
            syntax +
                "not valid JSON: syntax error while parsing value - invalid literal; last read: "
                "'\xEF\xBB\xBF\\xef' at line 1 column 4");  // a second BOM is no BOM
  EXPECT_EQ(verdict(" \xEF\xBB\xBF{}"), syntax +
                                            "not valid JSON: syntax error while parsing value - invalid literal; "
                                            "last read: ' \\xef' at line 1 column 2");  // nor one after a blank
  for (const std::string text : {"{} /x", "/* open", "{\"a\": 1 /*/ }", "{\"a\": 1 // c"}) EXPECT_FALSE(scan(text));
}

// Escapes are decoded on the tape (no second parse); a malformed one is
// nlohmann's syntax error, with its position and what it last read.
TEST(JsonTape, DecodesEscapesAndWordsMalformedOnesAsNlohmann) {
  const auto tape = scan(R"({"a": "\ud83d\ude00\u00e9\u0000\u20AC", "\u0062": "\"\\\/\b\f\n\r\t"})");
  ASSERT_TRUE(tape);
  EXPECT_EQ(tape->root().find("a")->str(), std::string("\xF0\x9F\x98\x80\xC3\xA9\0\xE2\x82\xAC", 10));
  EXPECT_EQ(tape->root()[1].key(), "b");
  EXPECT_EQ(tape->root().find("b")->str(), "\"\\/\b\f\n\r\t");
  const std::string syntax = "JSON_SYNTAX |  | not valid JSON: syntax error while parsing value - invalid string: ";
  EXPECT_EQ(verdict(R"({"a": "\ud800"})"), syntax +
                                               "surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF; last "
                                               "read: '\"\\ud800\"' at line 1 column 14");
  EXPECT_EQ(verdict(R"({"a": "\udc00"})"),
            syntax + "surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF; last read: '\"\\udc00' at line 1 column 13");
  EXPECT_EQ(verdict(R"({"a": "\ud800\u0041"})"), syntax +
                                                     "surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF; "
                                                     "last read: '\"\\ud800\\u0041' at line 1 column 19");
  EXPECT_EQ(verdict(R"({"a": "\x"})"),
            syntax + "forbidden character after backslash; last read: '\"\\x' at line 1 column 9");
  EXPECT_EQ(verdict(R"({"a": "\u12g4"})"),
            syntax + "'\\u' must be followed by 4 hex digits; last read: '\"\\u12g' at line 1 column 12");
  EXPECT_EQ(verdict("{\"a\": \"x\ty\"}"), syntax +
                                              "control character U+0009 (HT) must be escaped to \\u0009 or \\t; "
                                              "last read: '\"x<U+0009>' at line 1 column 9");
}

// The limits are the tape's own, each refused with the JSON path of the value;
// the first problem in the text is the one named, as a reader that stops there.
TEST(JsonTape, RefusesLimitsWithTheirPathAndTheFirstProblemFirst) {
  EXPECT_EQ(verdict(R"({"x":[1,{"k":99999999999999999999}]})"),
            "JSON_LIMIT | $.x[1].k | integer 99999999999999999999 does not fit a signed 64-bit value");
  EXPECT_EQ(verdict(R"({"x":[1,{"k":18446744073709551615}]})"),
            "JSON_LIMIT | $.x[1].k | integer 18446744073709551615 does not fit a signed 64-bit value (at most "
            "9223372036854775807)");
  EXPECT_EQ(verdict(R"({"x":[1,{"k":-9223372036854775809}]})"),
            "JSON_LIMIT | $.x[1].k | integer -9223372036854775809 does not fit a signed 64-bit value");
  EXPECT_EQ(verdict("[" + std::string(50, '9') + "]"),
            "JSON_LIMIT | $[0] | integer 99999999999999999999...99999999999999999999 (50 characters) does not fit a "
            "signed 64-bit value");
  // Beyond a double's range, nlohmann refuses the number itself.
  EXPECT_EQ(verdict(R"({"a": -1e999})"), "JSON_SYNTAX |  | not valid JSON: number overflow parsing '-1e999'");
  EXPECT_EQ(verdict("[" + std::string(400, '9') + "]"),
            "JSON_SYNTAX |  | not valid JSON: number overflow parsing '99999999999999999999...99999999999999999999 "
            "(400 characters)'");
  EXPECT_TRUE(scan(R"({"a":9223372036854775807,"b":-9223372036854775808,"c":-0,"d":1.5e3})"));
  // Nesting: 128 levels read, the 129th refused at the path of the value opening it.
  EXPECT_TRUE(scan(std::string(128, '[') + std::string(128, ']')));
  EXPECT_EQ(verdict("{\"a\":" + std::string(200, '[') + std::string(200, ']') + "}"),
            "JSON_LIMIT | $.a[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]... | nested deeper than 128 "
            "levels of objects and arrays");
  // A key said twice, decoded, at the object's path ...
  EXPECT_EQ(verdict(R"({"q":{"a":1,"b":[1,2,{"c":1,"\u0063":2}]}})"),
            "DUPLICATE_KEY | $.q.b[2] | duplicate key 'c' in one object");
  // ... named before what comes after it in the text: a duplicate inside its
  // value, a number too large, a syntax error, the end of the text.
  for (const std::string& text : std::vector<std::string>{
           R"({"a":1,"a":{"b":1,"b":2}})", R"({"a":1,"a":2,"n":1e999})", R"({"a":1,"a":2,"n":99999999999999999999})",
           R"({"a":1,"a" 2})", R"({"a":1,"a")", "{\"a\":1,\"a\":" + std::string(200, '[')}) {
    EXPECT_EQ(verdict(text), "DUPLICATE_KEY | $ | duplicate key 'a' in one object") << text;
  }
  // ... and after what comes before it.
  EXPECT_EQ(verdict(R"({"n":99999999999999999999,"a":1,"a":2})"),
            "JSON_LIMIT | $.n | integer 99999999999999999999 does not fit a signed 64-bit value");
}

// Each member carries its key's bytes and each value its own: what migrate's
// spans are read from, comments and escaped keys included.
TEST(JsonTape, NodesCarryTheByteOffsetsOfKeysAndValues) {
  const std::string text = "{\"a\" /* k */ : [1, \"x\"], // c\n \"\\u0062\":{\"c\":null}}";
  const auto tape = scan(text);
  ASSERT_TRUE(tape);
  const JsonNode& root = tape->root();
  EXPECT_FALSE(root.is_member());
  const JsonNode& a = *root.find("a");
  EXPECT_TRUE(a.is_member());
  EXPECT_EQ(slice(text, a.key_begin_offset(), a.key_end_offset()), "\"a\"");
  EXPECT_EQ(slice(text, a.begin_offset(), a.end_offset()), "[1, \"x\"]");
  EXPECT_FALSE(a[1].is_member());
  EXPECT_EQ(slice(text, a[1].begin_offset(), a[1].end_offset()), "\"x\"");
  const JsonNode& b = *root.find("b");
  EXPECT_EQ(slice(text, b.key_begin_offset(), b.key_end_offset()), "\"\\u0062\"");
  EXPECT_EQ(slice(text, b.begin_offset(), b.end_offset()), "{\"c\":null}");
  const JsonNode& c = *b.find("c");
  EXPECT_EQ(slice(text, c.key_begin_offset(), c.key_end_offset()), "\"c\"");
  EXPECT_EQ(slice(text, c.begin_offset(), c.end_offset()), "null");
}
