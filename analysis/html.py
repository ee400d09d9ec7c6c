"""results/<machine>/report.html: REPORT.md and APPENDIX.md as one page a browser opens, with the
figures inline (one file to send) and every table sortable by a click on its header."""
from __future__ import annotations

import base64
import re
from pathlib import Path

import markdown

STYLE = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;line-height:1.45}
table{border-collapse:collapse;margin:1em 0;font-size:.85em;display:block;overflow-x:auto}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3;cursor:pointer;user-select:none}th[data-order]::after{content:attr(data-order)}
img{max-width:100%}blockquote{border-left:4px solid #e0a000;margin:1em 0;padding:.2em 1em;background:#fff8e6}"""
# Sort a table by the clicked column: numbers (the first one in a cell) as numbers, the rest as text.
SCRIPT = """function key(c){const m=c.textContent.replace(/,/g,'').match(/-?\\d+(\\.\\d+)?(e-?\\d+)?/);return m?parseFloat(m[0]):c.textContent}
document.querySelectorAll('table').forEach(t=>t.querySelectorAll('th').forEach((h,i)=>h.addEventListener('click',()=>{
const b=t.tBodies[0],up=h.dataset.order!==' \\u25b2';t.querySelectorAll('th').forEach(x=>delete x.dataset.order);
h.dataset.order=up?' \\u25b2':' \\u25bc';[...b.rows].sort((r,s)=>{const x=key(r.cells[i]),y=key(s.cells[i]);
return (typeof x===typeof y?(x<y?-1:x>y?1:0):(typeof x==='number'?-1:1))*(up?1:-1)}).forEach(r=>b.appendChild(r))})));"""


def inline_figures(html: str, folder: Path) -> str:
    """Each <img src="figures/x.png"> as a data URI, so the page is one file."""
    def data(m: re.Match) -> str:
        path = folder / m.group(1)
        if not path.is_file():
            return m.group(0)
        return f'src="data:image/png;base64,{base64.b64encode(path.read_bytes()).decode()}"'
    return re.sub(r'src="([^"]+\.png)"', data, html)


def render(out_dir: str | Path) -> Path:
    out = Path(out_dir)
    parts = [(out / "REPORT.md").read_text()]
    if (out / "APPENDIX.md").is_file():
        parts.append('<a id="appendix"></a>\n\n' + (out / "APPENDIX.md").read_text())
    text = "\n\n".join(parts).replace("(APPENDIX.md)", "(#appendix)").replace("(REPORT.md)", "(#)")
    body = inline_figures(markdown.markdown(text, extensions=["tables"]), out)
    page = (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>trainperf: {out.name}</title>"
            f"<style>{STYLE}</style></head>\n<body>\n{body}\n<script>{SCRIPT}</script>\n</body></html>\n")
    path = out / "report.html"
    path.write_text(page)
    return path
