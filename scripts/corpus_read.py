#!/usr/bin/env python3
"""Writes NAME.EXT.expected beside each document of the parsing corpus that its project ships no
text for, from an independent reader of its format:

    corpus_read.py ROOT

- PowerPoint (`.pptx`): python-pptx. Every shape's text (in groups and tables too), charts'
  titles, categories and series names, and the slides' notes.
- Word (`.docx`): python-docx. The body's paragraphs and tables, in order.
- Excel 97-2003 (`.xls`): xlrd. Text cells, and numbers shown in the General format.
- OpenDocument (`.odt`, `.ods`, `.odp`): odfpy. Every paragraph and heading of the body (a
  spreadsheet's cells hold the text they show; a presentation's notes are in its pages).

The readers come from the cache (`make setup-test` installs them); PYTHONPATH names them. A
document a reader fails on gets no expected text: the corpus holds files broken on purpose, and
engram's own test holds every file to its plain reading either way.
"""

import pathlib
import sys


def pptx_text(path):
    from pptx import Presentation
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    out = []

    def shape_text(shape):
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            for inner in shape.shapes:
                shape_text(inner)
            return
        if getattr(shape, "has_text_frame", False):
            out.append(shape.text_frame.text)
        if getattr(shape, "has_table", False):
            for row in shape.table.rows:
                for cell in row.cells:
                    out.append(cell.text)
        if getattr(shape, "has_chart", False):
            try:
                chart = shape.chart
                if chart.has_title and chart.chart_title.has_text_frame:
                    out.append(chart.chart_title.text_frame.text)
                for plot in chart.plots:
                    out.extend(str(c) for c in plot.categories)
                    out.extend(s.name or "" for s in plot.series)
            except NotImplementedError:
                pass  # a chart type python-pptx does not read: the slide's other text stands

    deck = Presentation(str(path))
    for slide in deck.slides:
        for shape in slide.shapes:
            shape_text(shape)
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            out.append(slide.notes_slide.notes_text_frame.text)
    return "\n".join(out)


def docx_text(path):
    import docx

    document = docx.Document(str(path))
    out = []
    for block in document.iter_inner_content():
        if hasattr(block, "rows"):
            for row in block.rows:
                for cell in row.cells:
                    out.append(cell.text)
        else:
            out.append(block.text)
    return "\n".join(out)


def xls_text(path):
    import io

    import xlrd

    # xlrd reports what it works around (a missing code page) on stdout unless given a log.
    book = xlrd.open_workbook(str(path), formatting_info=True, logfile=io.StringIO())
    out = []
    for sheet in book.sheets():
        for r in range(sheet.nrows):
            for c in range(sheet.ncols):
                cell = sheet.cell(r, c)
                if cell.ctype == xlrd.XL_CELL_TEXT:
                    out.append(cell.value)
                elif cell.ctype == xlrd.XL_CELL_NUMBER:
                    shown = book.format_map.get(book.xf_list[cell.xf_index].format_key)
                    if shown is not None and shown.format_str == "General":
                        value = cell.value
                        out.append(str(int(value)) if value == int(value) else repr(value))
    return "\n".join(out)


def odf_text(path):
    from odf import opendocument, text
    from odf.element import Element
    from odf.namespaces import DRAWNS, TEXTNS

    # A frame, a note or a nested paragraph is set apart by spaces, as a reader sees it; any
    # other element (a span, a link, a field) continues the word around it.
    blocks = {(TEXTNS, name) for name in ("p", "h", "note", "list", "list-item")}
    spaces = {(TEXTNS, "s"): " ", (TEXTNS, "tab"): "\t", (TEXTNS, "line-break"): "\n"}

    def extract(node, out):
        if node.nodeType == Element.TEXT_NODE:
            out.append(node.data)
            return
        if node.nodeType != Element.ELEMENT_NODE:
            return
        if node.qname in spaces:
            out.append(spaces[node.qname])
            return
        apart = node.qname in blocks or node.qname[0] == DRAWNS
        if apart:
            out.append(" ")
        for child in node.childNodes:
            extract(child, out)
        if apart:
            out.append(" ")

    document = opendocument.load(str(path))
    out = []
    for kind in (text.H, text.P):
        for element in document.body.getElementsByType(kind):
            extract(element, out)
            out.append("\n")
    return "".join(out)


READERS = {
    "pptx": pptx_text,
    "docx": docx_text,
    "xls": xls_text,
    "odt": odf_text,
    "ods": odf_text,
    "odp": odf_text,
}


def main():
    root = pathlib.Path(sys.argv[1])
    # What an earlier run wrote is written again (the script or a reader may have changed).
    written = root / ".read-list"
    if written.exists():
        for name in written.read_text(encoding="utf-8").splitlines():
            (root / name).unlink(missing_ok=True)
    read, failed, names = 0, 0, []
    for doc in sorted(root.rglob("*")):
        reader = READERS.get(doc.suffix[1:])
        if reader is None or not doc.is_file():
            continue
        expected = doc.with_name(doc.name + ".expected")
        if expected.exists():
            continue
        try:
            content = reader(doc)
        except Exception:  # noqa: BLE001 (a broken document: no expected text)
            failed += 1
            continue
        if content.strip():
            expected.write_text(content, encoding="utf-8")
            names.append(str(expected.relative_to(root)))
            read += 1
    written.write_text("".join(name + "\n" for name in names), encoding="utf-8")
    print(f"corpus_read: {read} documents read, {failed} unreadable", file=sys.stderr)


if __name__ == "__main__":
    main()
