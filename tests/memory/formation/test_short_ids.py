"""A listing's ids are their shortest unique prefixes, 8 characters at least (as git abbreviates
commits): an id is told from every other by telling it from its neighbours in id order."""

from __future__ import annotations

import uuid

from memory.formation.whole_memory import _shortest_prefix

ID = uuid.UUID("1234abcd-5678-4ef0-9abc-def012345678")


def test_an_id_alone_or_far_from_its_neighbours_shows_its_first_eight_characters() -> None:
    assert _shortest_prefix(ID, [None, None]) == "1234abcd"
    assert _shortest_prefix(ID, [uuid.UUID("0fffffff-0000-4000-8000-000000000000"), None]) == "1234abcd"


def test_a_neighbour_sharing_more_makes_the_prefix_longer_and_never_ending_on_a_hyphen() -> None:
    before = uuid.UUID("1234abcd-5600-4000-8000-000000000000")  # shares "1234abcd-56"
    after = uuid.UUID("1234abce-0000-4000-8000-000000000000")  # shares "1234abc"
    assert _shortest_prefix(ID, [before, after]) == "1234abcd-567"
    # Sharing the first eight: the ninth character is the hyphen, so the prefix takes one more.
    assert _shortest_prefix(ID, [uuid.UUID("1234abcd-0000-4000-8000-000000000000"), None]) == "1234abcd-5"
