"""Tables for the results a learner prints or shows in Jupyter (``graph_memory``,
``explain_backward``): the same rows as aligned text and as an HTML table."""
import html


def text_table(header, rows, right=(), notes=None):
    """``header`` and ``rows`` (tuples of strings) as aligned text columns; the columns
    numbered in ``right`` are right-aligned. ``notes`` (row index -> lines) are printed
    under a row, indented to its second column. Nothing is cut: columns are as wide as
    their widest cell."""
    widths = [max(len(r[c]) for r in [header] + rows) for c in range(len(header))]

    def line(row):
        cells = [cell.rjust(w) if c in right else cell.ljust(w)
                 for c, (cell, w) in enumerate(zip(row, widths))]
        return "  ".join(cells).rstrip()

    out = [line(header)]
    indent = " " * (widths[0] + 2)
    for k, row in enumerate(rows):
        out.append(line(row))
        out += [indent + note for note in (notes or {}).get(k, ())]
    return "\n".join(out)


def html_table(header, rows, caption="", footer="", notes=None):
    """The same table as HTML (Jupyter's ``_repr_html_``): a caption above, ``notes`` (row
    index -> lines) in a row of their own under a row, ``footer`` below."""
    def cells(row, tag):
        return "".join(f"<{tag} style='text-align:left'>{html.escape(c)}</{tag}>" for c in row)

    body = [f"<tr>{cells(header, 'th')}</tr>"]
    for k, row in enumerate(rows):
        body.append(f"<tr>{cells(row, 'td')}</tr>")
        for note in (notes or {}).get(k, ()):
            body.append(f"<tr><td></td><td colspan='{len(header) - 1}' style='text-align:left'>"
                        f"<small>{html.escape(note)}</small></td></tr>")
    top = f"<caption style='text-align:left'>{html.escape(caption)}</caption>" if caption else ""
    bottom = f"<p>{html.escape(footer)}</p>" if footer else ""
    return f"<table>{top}{''.join(body)}</table>{bottom}"
