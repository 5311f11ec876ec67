"""Direct operator for `DroppedRows` (`late_rows(pc)`, `invalid_rows(pc)`; see `transforms.late`).

The node's one input is the edge of the transform whose dropped rows it
reads. The executor hands it only that transform's `SideRows` of its kind
(never the edge's rows, watermarks or idleness), and it passes them on as
its own rows: a stream with no watermark.
"""

from __future__ import annotations

from sparkbeam.runners.direct.operator import Message, Operator, SideRows


class DroppedRowsOperator(Operator):
    def on_side(self, port: int, rows: SideRows) -> list[Message]:
        return [rows.chunk]
