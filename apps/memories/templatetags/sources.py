"""How a memory's source messages read on a page: runs of consecutive messages as ranges."""

from django import template

register = template.Library()


@register.filter
def runs(indices) -> list[tuple[int, int]]:
    """[2640, 2641, …, 2679, 2700] → [(2640, 2679), (2700, 2700)]: a memory made from a stretch of the chat is
    one range, not forty numbers."""
    found: list[tuple[int, int]] = []
    for index in sorted({int(i) for i in indices or []}):
        if found and index == found[-1][1] + 1:
            found[-1] = (found[-1][0], index)
        else:
            found.append((index, index))
    return found
