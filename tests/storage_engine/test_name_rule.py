"""The name rule is stated once (storage_engine.rules.validation) and the console's hint and check are built from a
copy of it (frontend/src/features/namespaces/nameRule.json): the copy may not drift, and what the hint shows
is accepted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storage_engine.errors import InvalidArgumentError
from storage_engine.rules.validation import NAME_MAX_LENGTH, NAME_RULE, name_rule_facts, validate_namespace_name

COPY = Path(__file__).resolve().parents[2] / "frontend" / "src" / "features" / "namespaces" / "nameRule.json"


def test_the_consoles_copy_of_the_name_rule_is_the_engines() -> None:
    assert json.loads(COPY.read_text()) == name_rule_facts()


def test_every_example_the_hint_shows_is_accepted() -> None:
    examples = name_rule_facts()["examples"]
    assert isinstance(examples, list) and examples
    assert [validate_namespace_name(name) for name in examples] == examples


@pytest.mark.parametrize("name", ["", ".", "..", "x" * (NAME_MAX_LENGTH + 1), "é", "a b", "a/b", "a\n"])
def test_what_the_rule_excludes_is_refused_in_its_words(name: str) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        validate_namespace_name(name)
    assert (refused.value.field, refused.value.rule) == ("name", NAME_RULE)


def test_the_rule_states_its_limits() -> None:
    assert f"1-{NAME_MAX_LENGTH} characters" in NAME_RULE and "ASCII" in NAME_RULE
    assert all(repr(reserved) in NAME_RULE for reserved in (".", ".."))
    assert validate_namespace_name("x" * NAME_MAX_LENGTH)  # the longest one the rule allows
