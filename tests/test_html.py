"""report.html: the report and its appendix as one page, rendered in headless Chromium (Debian's
package): every figure loads, every table has its rows, a click on a header sorts."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from analysis import aggregate, html, report

H200 = sorted((Path(__file__).parent / "data" / "h200-timing").glob("*.json"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# After load the page reports what it shows: figures that decoded, tables and their body rows,
# and the throughput column of the first table that has one, before and after a click on its header.
PROBE = """<script>window.addEventListener('load',()=>{const imgs=[...document.images];
const tables=[...document.querySelectorAll('table')];
const t=tables.find(x=>(x.querySelectorAll('th')[1]||{}).textContent.startsWith('throughput ('));
const before=[...t.tBodies[0].rows].map(r=>r.cells[1].textContent);t.querySelectorAll('th')[1].click();
const after=[...t.tBodies[0].rows].map(r=>r.cells[1].textContent);
document.body.dataset.result=JSON.stringify({images:imgs.length,loaded:imgs.filter(i=>i.complete&&i.naturalWidth>0).length,
tables:tables.length,empty:tables.filter(x=>!x.tBodies[0]||x.tBodies[0].rows.length==0).length,
sorted:after,unsorted:before})});</script>"""


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    from trainperf import config, variants
    out = tmp_path_factory.mktemp("results") / "h200"
    aggregate.main(H200, [], out, catalog=variants.catalog(config.load()))
    report.render(out)
    return html.render(out)


def test_the_page_holds_the_report_and_its_appendix_with_figures_inline(page):
    text = page.read_text()
    assert "<h2>Summary</h2>" in text and "Appendix: training performance" in text
    assert 'src="figures/' not in text and text.count('src="data:image/png;base64,') == \
        len(list((page.parent / "figures").glob("*.png")))
    assert 'href="#appendix"' in text and 'id="appendix"' in text


def chromium_dom(path: Path, tmp_path: Path) -> str:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom", path.as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.skipif(not CHROMIUM, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_chromium_renders_every_figure_and_table_and_sorts_on_a_click(page, tmp_path):
    import json
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = chromium_dom(probed, tmp_path)
    found = re.search(r'data-result="([^"]+)"', dom)
    assert found, dom[-2000:]
    result = json.loads(found.group(1).replace("&quot;", '"'))
    assert result["images"] >= 1 and result["loaded"] == result["images"]
    assert result["tables"] >= 5 and result["empty"] == 0
    def key(cell):
        m = re.search(r"-?\d+(\.\d+)?(e-?\d+)?", cell.replace(",", ""))
        return float(m.group(0)) if m else float("inf")
    numbers = [key(c) for c in result["sorted"]]
    assert len(set(numbers)) >= 3 and result["sorted"] != result["unsorted"]  # the matrix's order is not the sorted one
    assert numbers == sorted(numbers) and sorted(result["sorted"]) == sorted(result["unsorted"])
