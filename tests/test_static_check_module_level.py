"""The static check parses a module's top level alone and a top-level def / class body when a reading asks for it
(grpo_compat.static_check.files): what it reads must be what the whole file's parse gives, node for node."""

import ast
import os
import sys

import pytest
import trl

from grpo_compat.static_check.files import Elided, Module, _top_level_definitions


def read(tmp_path, text: str) -> Module | None:
    path = tmp_path / "module.py"
    path.write_text(text, encoding="utf-8")
    return Module.read("module", str(tmp_path), str(path))


def same_as_whole_parse(module: Module, text: str) -> bool:
    return ast.dump(module.tree, include_attributes=True) == ast.dump(ast.parse(text), include_attributes=True)


def test_every_installed_trl_module_reads_as_its_whole_parse_and_most_leave_their_bodies_out():
    folder = os.path.dirname(trl.__file__)
    read_whole = split = 0
    for parent, _, names in os.walk(folder):
        for name in names:
            if not name.endswith(".py"):
                continue
            path = os.path.join(parent, name)
            module = Module.read("trl.x", folder, path)
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            assert module is not None and same_as_whole_parse(module, text), path
            if any(isinstance(statement, Elided) for statement in module.statements):
                split += 1
            else:
                read_whole += 1
    assert split > 2 * read_whole  # the split is the common case (a module without a top-level def reads whole)


def test_a_body_is_parsed_when_read_with_the_files_line_numbers(tmp_path):
    text = (
        "import os\n\n\n@decorate\nclass Trainer(Base):\n    def train(self):\n        return os.sep\n\n\n"
        'def helper(x):\n    """a\n\ndef inside(): pass\n"""\n    return x\n\nVALUE = 1\n'
    )
    module = read(tmp_path, text)
    assert [type(s).__name__ for s in module.statements] == ["Import", "Elided", "Elided", "Assign"]
    assert module.functions.found["helper"].node is None  # not parsed yet
    helper = module.functions["helper"]
    assert isinstance(helper, ast.FunctionDef) and (helper.lineno, helper.end_lineno) == (10, 15)
    assert module.functions["helper"] is helper  # parsed once
    assert "inside" not in module.functions and module.bound >= {"os", "Trainer", "helper", "VALUE"}
    assert module.classes["Trainer"].decorator_list[0].lineno == 4
    assert same_as_whole_parse(module, text)


@pytest.mark.parametrize(
    "text",
    [
        'def f():\n    s = """\ndef g():\n    pass\n"""\n    return s\n',  # column-0 lines inside a string
        "def f():\n    return [\n1,\n]\n\nx = 1\n",  # inside brackets
        "def f():\n    return 1 + \\\n2\n\nx = 1\n",  # a backslash continuation
        "def f():\n    # a comment\n# at column 0\n    return 1\n",  # comments are not statements
        "def f():\n    return f'{x!r:>{width}}' + rb'\\'' + \"it's\"\n\nx = 1\n",  # literals the lexer must end right
        "def f():\n    return f'{x}' + f'{\"}\"}'\n",  # a brace in a string inside a replacement field
        "@a\n@b(\n1)\ndef f(): pass\nclass C: x = 1\nasync def g(): pass\n",
    ],
)
def test_text_whose_top_level_is_certain_reads_as_its_whole_parse(tmp_path, text):
    module = read(tmp_path, text)
    assert module is not None and same_as_whole_parse(module, text)


@pytest.mark.parametrize(
    "text",
    [
        "def f():\n    return 1\r\ndef g(): pass\rx = 1\n",  # a lone carriage return ends a line for Python
        "def f():\n    return 'unterminated\n",
    ],
)
def test_doubtful_text_is_parsed_whole(tmp_path, text):
    assert _top_level_definitions(text) is None
    module = read(tmp_path, text)
    try:
        whole = ast.parse(text)
    except SyntaxError:
        assert module is None
    else:
        assert module is not None and ast.dump(module.tree) == ast.dump(whole)


def test_a_start_read_inside_brackets_parses_the_module_whole(tmp_path):
    text = "def f():\n    return [\n1,\n]\n\nx = 1\n"  # "1," at column 0 is taken for a statement's start
    assert _top_level_definitions(text) == [(1, 2, "def", "f")]
    module = read(tmp_path, text)
    assert not any(isinstance(statement, Elided) for statement in module.statements)
    assert same_as_whole_parse(module, text)


def test_a_body_that_does_not_parse_reads_as_a_definition_that_accepts_anything(tmp_path):
    module = read(tmp_path, "import os\n\n\ndef f(x):\n    return (1\n")  # an unclosed bracket in a body
    assert module.bound >= {"os", "f"}
    stub = module.functions["f"]
    assert stub.args.vararg.arg == "a" and stub.args.kwarg.arg == "k" and stub.lineno == 4


@pytest.mark.skipif(sys.version_info < (3, 12), reason="a replacement field holding its own quote is Python 3.12")
def test_an_f_string_holding_its_own_quote_is_a_doubt(tmp_path):
    text = 'def f(d):\n    return f"{d["a"]}"\nx = 1\n'
    assert _top_level_definitions(text) is None
    assert same_as_whole_parse(read(tmp_path, text), text)


def test_the_keyword_reading_parses_every_definition_that_may_call_a_name(tmp_path):
    from grpo_compat.static_check.calls import judged_calls

    text = (
        "from transformers import build\n\n\ndef a():\n    return build(x=1)\n\n\n"
        "def b():\n    return (build)(x=2)\n\n\n"
        "def c():\n    return [build  # a comment\n        \\\n        (x=3)]\n\n\ndef d():\n    return build\n\n\n"
        "def e():\n    return other.build(x=4)\n"
    )
    module = read(tmp_path, text)
    wanted = {ast.unparse(call) for call in judged_calls(module, None, {"build"}, named_callees=True)}
    assert wanted == {"build(x=1)", "build(x=2)", "build(x=3)"}
    assert [f.node is None for f in module.functions.found.values()] == [False, False, False, True, True]


def test_the_checks_walk_visits_what_ast_walk_visits_in_the_same_order():
    from grpo_compat.static_check.files import walk

    folder = os.path.dirname(trl.__file__)
    for name in ("trainer/grpo_trainer.py", "trainer/grpo_config.py", "import_utils.py"):
        with open(os.path.join(folder, name), encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        assert [id(node) for node in walk(tree)] == [id(node) for node in ast.walk(tree)]


@pytest.mark.parametrize("name", ["vllm", "is_vllm_available", "_x"])
def test_holds_word_is_a_word_boundary_search(name):
    import re

    from grpo_compat.static_check.files import holds_word

    texts = ["", name, f"a{name}", f"{name}_b", f"x.{name}(", f"{name}2 {name}", f"é{name}", f"{name}é", f"({name})"]
    for text in texts:
        assert holds_word(text, name) == bool(re.search(rf"\b{re.escape(name)}\b", text)), text
