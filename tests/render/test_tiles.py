import pytest

from pagesight.render import cut_tiles


def test_page_no_taller_than_a_tile_and_a_bit_is_one_tile():
    assert cut_tiles(850, 1100) == [(0.0, 0.0, 850.0, 1100.0)]
    assert cut_tiles(850, 1024) == [(0.0, 0.0, 850.0, 1024.0)]


def test_tall_page_is_cut_into_contiguous_tiles_covering_it():
    boxes = cut_tiles(800, 2600)
    assert [b[1] for b in boxes] == [0.0, 1024.0, 2048.0]
    assert boxes[-1][3] == 2600.0
    assert all(a[3] == b[1] for a, b in zip(boxes, boxes[1:]))


def test_short_last_sliver_joins_the_tile_above():
    boxes = cut_tiles(800, 2048 + 100)
    assert boxes == [(0.0, 0.0, 800.0, 1024.0), (0.0, 1024.0, 800.0, 2148.0)]


@pytest.mark.parametrize("size", [(0, 10), (10, 0), (-1, 5)])
def test_invalid_sizes_are_refused(size):
    with pytest.raises(ValueError):
        cut_tiles(*size)
