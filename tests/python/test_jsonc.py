"""Comments in authored descriptors: blanked outside strings, newlines kept, so the
parser's line and column still point into the file as written (SPEC 2.1)."""

from __future__ import annotations

import pytest

from ukdpack import jsonc


@pytest.mark.parametrize(("text", "stripped"), [
    ('{"a": 1} // note', '{"a": 1}        '),
    ('{"a": /* x\ny */ 1}', '{"a":     \n     1}'),
    ('{"url": "http://x/*y*/"}', '{"url": "http://x/*y*/"}'),  # markers inside a string
    ('{"q": "a\\"//b"} //c', '{"q": "a\\"//b"}    '),  # an escaped quote does not end it
    ('{"p": "a\\\\"} //c', '{"p": "a\\\\"}    '),  # an escaped backslash does
    ('{"a": 1/**/}', '{"a": 1    }'),
    ('{"a": "x/y"}', '{"a": "x/y"}'),
    ('{"a": 2}', '{"a": 2}'),
])
def test_comments_are_blanked_and_strings_kept(text: str, stripped: str) -> None:
    assert jsonc.strip_comments(text) == stripped
    assert len(jsonc.strip_comments(text)) == len(text)


def test_unterminated_comment_names_its_line() -> None:
    with pytest.raises(jsonc.JsoncError, match="unterminated /\\* comment starting on line 3"):
        jsonc.strip_comments('{\n "a": 1, // a /* in a line comment\n /* open "quoted\n}\n')
    with pytest.raises(jsonc.JsoncError, match="starting on line 2"):
        jsonc.strip_comments('{"s": "/* in a string */"}\n/*/ never closed')


def test_errors_after_a_block_comment_point_into_the_file() -> None:
    with pytest.raises(jsonc.JsoncError, match="at line 4 column 7"):
        jsonc.loads('{\n/* one\ntwo */\n "a": ,}')
