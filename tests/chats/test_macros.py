import pytest

from apps.chats.services.macros import macros_substitute


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{char}} waves at {{user}}.", "Mira waves at Ash."),
        ("{{CHAR}} and {{User}}", "Mira and Ash"),
        ("<BOT> greets <USER>; <bot> and <user>", "Mira greets Ash; Mira and Ash"),
        ("{{char}}{{char}}", "MiraMira"),
        ("no macros {{charname}} {{ char }} <char>", "no macros {{charname}} {{ char }} <char>"),
        ("", ""),
    ],
)
def test_name_macros_are_replaced_in_any_case(text, expected):
    assert macros_substitute(text, char="Mira", user="Ash") == expected


def test_a_name_that_reads_like_a_macro_is_not_replaced_again():
    assert macros_substitute("{{user}} meets {{char}}", char="{{user}}", user="<BOT>") == "<BOT> meets {{user}}"
