"""The prerequisites read from a compile's depfile (clang's ``-MD``): what the compile
cache records a compile read, so a name read wrong loses a dependency."""

from __future__ import annotations

from ukdpack.produce.compiler import parse_depfile


def test_a_depfile_names_each_prerequisite_once_with_its_escapes() -> None:
    text = ("/tmp/out.o: /src/k.hip \\\n  /opt/rocm/include/hip/a.h \\\r\n"
            "  /src/with\\ space/b.h\t/src/back\\slash.h /src/end\\\\ /src/tab.h\n"
            "/src/c.h\x0b/src/d.h\u00a0/src/e.h")
    assert parse_depfile(text) == [
        "/src/k.hip", "/opt/rocm/include/hip/a.h", "/src/with space/b.h",
        "/src/back\\slash.h", "/src/end\\ /src/tab.h", "/src/c.h", "/src/d.h", "/src/e.h"]
    # The target's name may hold a colon; the prerequisites start after ": ".
    assert parse_depfile("C:/o.o: a.h b.h") == ["a.h", "b.h"]
    assert parse_depfile("o.o:") == [] and parse_depfile("") == []
