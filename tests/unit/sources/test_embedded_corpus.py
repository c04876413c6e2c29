"""The embedded corpus: its definitions are found in `ast.walk`'s order without walking every
expression, and each call hands out fresh documents."""

from __future__ import annotations

import ast
import sysconfig
import textwrap
from pathlib import Path

from lmforge.pipeline.sources.embedded import _DEFINITIONS, _definitions, embedded_documents

NESTED = textwrap.dedent(
    '''
    """module"""
    import sys
    x = [lambda: 1 for _ in range(3)]
    if sys.platform == "linux":
        def in_if(): """a"""
    else:
        class InElse:
            """b"""
            def method(self):
                def inner(): """c"""
                return inner
    try:
        def in_try(): pass
    except ValueError:
        async def in_handler(): """d"""
    finally:
        for i in range(2):
            while False:
                with open("f") as f:
                    def deep(): """e"""
    match x:
        case [1]:
            class InCase: pass
        case _:
            @staticmethod
            def decorated(): """f"""
    def last(): pass
    '''
)


def _walked(tree: ast.AST) -> list[ast.AST]:
    return [node for node in ast.walk(tree) if isinstance(node, _DEFINITIONS)]


def test_definitions_come_in_ast_walk_order_however_they_nest():
    tree = ast.parse(NESTED)
    found = list(_definitions(tree))
    assert found == _walked(tree)
    names = [getattr(node, "name", "<module>") for node in found]
    assert len(names) == 11 and {"deep", "inner", "in_handler", "decorated"} <= set(names)


def test_definitions_match_ast_walk_on_standard_library_modules():
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for name in (
        "argparse.py",
        "typing.py",
        "asyncio/base_events.py",
        "email/_header_value_parser.py",
    ):
        tree = ast.parse((stdlib / name).read_text(encoding="utf-8"))
        assert list(_definitions(tree)) == _walked(tree), name


def test_every_call_hands_out_fresh_documents():
    first = list(embedded_documents())
    assert len(first) > 500 and len({d.id for d in first}) == len(first)
    original = first[0].text
    first[0].text = "changed by a cleaning step"
    first[0].meta["x"] = 1
    again = next(iter(embedded_documents()))
    assert again.text == original and again.meta == {}
