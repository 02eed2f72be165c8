"""tfxd.replaced: an attribute replaced for a block and put back as it was, however the block ends."""

from __future__ import annotations

import types

import pytest

from tfxd.replaced import replaced


class Base:
    @classmethod
    def made(cls) -> str:
        return f"made by {cls.__name__}"

    def inherited(self) -> str:
        return "base"


class Child(Base):
    pass


def test_a_module_attribute_is_replaced_in_the_block_and_back_after_an_error():
    module = types.ModuleType("library")
    module.answer = 1
    with pytest.raises(RuntimeError), replaced(module, "answer", 2) as before:
        assert module.answer == 2 and before == 1
        raise RuntimeError("the block failed")
    assert module.answer == 1


def test_a_classmethod_is_put_back_a_classmethod():
    with replaced(Base, "made", classmethod(lambda cls: "replaced")):
        assert Child.made() == "replaced"
    assert isinstance(vars(Base)["made"], classmethod)
    assert Child.made() == "made by Child"  # bound to the class asked, as before


def test_an_inherited_attribute_is_removed_from_the_subclass_again():
    with replaced(Child, "inherited", lambda self: "child") as before:
        assert Child().inherited() == "child"
        assert before(Child()) == "base"
    assert "inherited" not in vars(Child)
    assert Child().inherited() == "base"
