"""``mg.viz.explore``: the page it writes, checked in Python and in a real headless browser.

The browser tests drive Debian's Chromium through its chromedriver (selenium); they skip,
saying why, where either is missing. Each opens the page of a small model from disk and
acts as a user would: opens a module, clicks a node and reads its panel, presses "step",
searches; the page must make no network request and log no console error.
"""
import inspect
import json
import os
import re
import shutil
import tempfile

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.autograd import engine
from minigrad.autograd.graph import AccumulateGrad
from minigrad.viz.graph import doc_rule, shape_text

pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is missing")

CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
CHROMEDRIVER = "/usr/bin/chromedriver"


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu()


class Net(nn.Module):
    """Two identical blocks (folded into one, ×2), a head, and a loss that uses the head's
    output three times (its gradients add up)."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        y = self.head(x)
        return (y * y).sum() + y.mean()


def step(device, anomaly=False):
    """A fresh model (seeded) and its loss, the graph not yet run backward."""
    mg.manual_seed(0)
    model = Net().to(device)
    x = mg.randn(5, 4).to(device)
    if anomaly:
        with mg.detect_anomaly():
            return model, model(x)
    return model, model(x)


def engine_order(device):
    """The nodes of a twin graph in the order the engine runs them (explain_backward)."""
    model, loss = step(device)
    return mg.viz.explain_backward(loss, model=model), model


# --- in Python --------------------------------------------------------------------------------

def test_page_is_self_contained_and_gradients_are_backwards(tmp_path, device, capsys):
    model, loss = step(device)
    page = mg.viz.explore(loss, tmp_path / "g.html", model=model)
    text = (tmp_path / "g.html").read_text()
    assert text == page.html and page.counts["bytes"] == len(text.encode())
    assert not re.search(r"<(script|link|img|iframe)[^>]*(src|href)=", text)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", text)
    twin, twin_loss = step(device)
    twin_loss.backward()
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6, err_msg=name)


def test_order_is_the_engines(device, capsys):
    steps, _ = engine_order(device)
    model, loss = step(device)
    page = mg.viz.explore(loss, model=model)
    assert len(page.order) == len(steps) == page.counts["steps"]
    for s, node in zip(steps, page.order):
        assert (s.node.name(), s.node.output_meta) == (node.name(), node.output_meta)


def test_repeated_blocks_fold_and_modules_start_collapsed(device):
    model, loss = step(device)
    data = page_data(mg.viz.explore(loss, model=model, depth=0))
    groups = {g["path"]: g for g in data["groups"][1:]}
    assert groups["blocks.0"]["label"] == "blocks.[0-1] ×2"
    assert groups[""]["open"] and not groups["head"]["open"] and not groups["blocks.0"]["open"]
    assert "blocks.1" not in groups  # drawn once, as blocks.0
    linear = [d for d in data["drawn"] if d["label"] == "linear"]
    assert sorted(len(d["items"]) for d in linear) == [1, 2]  # the head's, both blocks'


def page_data(page):
    return json.loads(page.html.split("const D = ", 1)[1].split(";\nconst PAD", 1)[0]
                      .replace("<\\/", "</"))


def test_refuses_what_it_cannot_show(device):
    with pytest.raises(RuntimeError, match="no grad_fn"):
        mg.viz.explore(mg.ones(2, device=device).sum())
    model, loss = step(device)
    with pytest.raises(TypeError, match="profile must have a node_costs"):
        mg.viz.explore(loss, profile=object())
    loss.backward()
    with pytest.raises(RuntimeError, match="already freed by backward"):
        mg.viz.explore(loss, model=model)


def test_inline_in_jupyter(device):
    model, loss = step(device)
    page = mg.viz.explore(loss, model=model)
    shown = page._repr_html_()
    assert shown.startswith("<iframe") and 'srcdoc="' in shown and "<script" not in shown


def test_source_lines_come_from_a_profile_without_anomaly_mode(device):
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2)).to(device)
    x = mg.randn(3, 4, device=device)
    with mg.profiler.profile(model=model) as prof:
        line = inspect.currentframe().f_lineno + 1
        loss = model(x).sum()  # the line each op must name
    page = mg.viz.explore(loss, model=model, profile=prof)
    sources = set(re.findall(r'"src": ?"([^"]*)"', page.html))
    assert sources and all(src.endswith(f"test_explore.py:{line}") for src in sources)
    plain = mg.viz.explore(model(x).sum(), model=model)  # neither anomaly mode nor profile
    assert not re.findall(r'"src": ?"([^"]+)"', plain.html)


def test_demo_writes_the_page_and_refuses_bad_options(tmp_path, capsys, device):
    from minigrad.demos import explore as demo
    path = demo.main(["--out", str(tmp_path), "--batch-size", "2", "--device", device])
    assert path == str(tmp_path / "seq2seq_step.html") and os.path.getsize(path) > 10_000
    assert f"file://{path}" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        demo.main(["--depth", "-1"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("python -m minigrad.demos.explore: error: argument --depth: "
                              "invalid choice: '-1'")


# --- in the browser ---------------------------------------------------------------------------

def _chromium():
    return next((p for p in CHROMIUM if os.path.exists(p)), None)


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    if _chromium() is None or not os.path.exists(CHROMEDRIVER):
        pytest.skip("Chromium or chromedriver is not installed (apt-get install chromium "
                    "chromium-driver)")
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1300,850"):
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="mg-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.binary_location = _chromium()
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    except Exception as e:  # a browser that cannot start here: say so, once
        pytest.skip(f"headless Chromium did not start: {str(e).splitlines()[0]}")
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def open_page(browser, page, tmp_path, name="g.html"):
    path = page.save(str(tmp_path / name))
    browser.get_log("browser"), browser.get_log("performance")  # start from an empty log
    browser.get("file://" + path)
    return "file://" + path


def js(browser, code):
    return browser.execute_script(code)


def element_of(browser, item):
    """The id of the drawn element whose data-items holds ``item``."""
    return js(browser, f"""return [...document.querySelectorAll('.node')].find(
        e => e.dataset.items.split(' ').includes('{item}')).id""")


def item_index(page, node):
    return next(k for k, it in enumerate(page.items) if it.node is node)


def test_browser_no_network_and_no_console_error(browser, tmp_path, device):
    model, loss = step(device)
    url = open_page(browser, mg.viz.explore(loss, model=model), tmp_path)
    js(browser, "document.getElementById('btn-open-all').click();"
                "document.getElementById('btn-step').click();")
    assert js(browser, "return performance.getEntriesByType('resource').length") == 0
    sent = [json.loads(e["message"])["message"] for e in browser.get_log("performance")]
    sent = [m["params"] for m in sent if m["method"] == "Network.requestWillBeSent"]
    assert [r["request"]["url"] for r in sent if r.get("documentURL") == url] == [url]
    assert not [r["request"]["url"] for r in sent
                if re.match(r"(https?|wss?|ftp):", r["request"]["url"])]
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == []


def test_browser_expand_a_module_and_read_a_node(browser, tmp_path, device):
    model, loss = step(device)
    page = mg.viz.explore(loss, model=model, depth=0)
    open_page(browser, page, tmp_path)
    head_op = next(it.node for it in page.items
                   if it.node is not None and it.node.scope is model.head)
    k = item_index(page, head_op)
    box = element_of(browser, k)
    assert box.startswith("g")  # inside the closed module "head"
    browser.find_element("id", box).click()
    node_el = element_of(browser, k)
    assert node_el.startswith("d") and js(browser, f"return !!document.getElementById("
                                                   f"'f{box[1:]}')")
    browser.find_element("id", node_el).click()
    text = {f: browser.find_element("id", f).text for f in ("p-fn", "p-rule", "p-outs", "p-mod")}
    assert text["p-fn"] == head_op.name()
    assert text["p-rule"] == " ".join(doc_rule(head_op).split())  # as HTML shows it
    (shape, dtype), = head_op.output_meta
    assert text["p-outs"] == f"{shape_text(shape)} {dtype}" == "(5, 3) float32"
    assert text["p-mod"] == "head"
    saved = browser.find_element("id", "p-saved").text
    assert "in0 (5, 4) float32 80 B" in saved


def test_browser_step_highlights_the_engines_nth_node(browser, tmp_path, device, capsys):
    steps, _ = engine_order(device)
    model, loss = step(device)
    page = mg.viz.explore(loss, model=model, collapse_repeats=False)
    open_page(browser, page, tmp_path)
    browser.find_element("id", "btn-open-all").click()
    button = browser.find_element("id", "btn-step")
    for n in range(1, len(steps) + 1):
        button.click()
        active = js(browser, "return [...document.querySelectorAll('.node.active')]"
                             ".map(e => e.dataset.items)")
        assert len(active) == 1
        nodes = [page.items[int(i)].node for i in active[0].split()]
        assert nodes == [page.order[n - 1]]
        expected = steps[n - 1]
        assert (nodes[0].name(), nodes[0].output_meta) == (expected.node.name(),
                                                           expected.node.output_meta)
        status = browser.find_element("id", "status").text
        assert status.startswith(f"step {n} of {len(steps)}: {expected.node.name()}")


def test_browser_gradients_add_up_at_a_tensor_used_twice(browser, tmp_path, device, capsys):
    steps, _ = engine_order(device)
    received, second = {}, None  # the first step that sends a node its second gradient
    for s in steps:
        for edge, g in zip(s.node.edges, s.grad_in):
            if edge and g is not None and not isinstance(edge[0], AccumulateGrad):
                received[edge] = received.get(edge, 0) + 1
                if received[edge] == 2 and second is None:
                    second = (s.step, edge[0])
    assert second is not None
    model, loss = step(device)
    page = mg.viz.explore(loss, model=model)
    open_page(browser, page, tmp_path)
    browser.find_element("id", "btn-open-all").click()
    for _ in range(second[0]):
        browser.find_element("id", "btn-step").click()
    assert "gradient #2" in browser.find_element("id", "status").text
    target = next(n for n in page.order if n.name() == second[1].name()
                  and n.output_meta == second[1].output_meta)
    el = element_of(browser, item_index(page, target))
    assert js(browser, f"return document.querySelector('#{el} .badge-text').textContent") \
        == "Σ2"
    freed = re.search(r"freed so far: (.*) of (.*) saved",
                      browser.find_element("id", "status").text)
    assert freed is not None


def test_browser_source_line_search_and_profile(browser, tmp_path, device):
    model, loss = step(device, anomaly=True)

    class Costs:
        def __init__(self, nodes):
            self.nodes = nodes

        def node_costs(self):
            return {n: type("Cost", (), dict(time_s=1e-3 * (i + 1), bytes=64 * (i + 1),
                                             flops=1000 * (i + 1)))()
                    for i, n in enumerate(self.nodes)}

    nodes = [n for n in engine.topological_order([loss.grad_fn])
             if not isinstance(n, AccumulateGrad)]
    page = mg.viz.explore(loss, model=model, profile=Costs(nodes))
    open_page(browser, page, tmp_path)
    search = browser.find_element("id", "search")
    search.send_keys("mean")  # y.mean()
    hit = browser.find_element("css selector", "#hits [data-item]")
    hit.click()
    assert browser.find_element("id", "p-title").text.startswith("mean(dims=(0, 1)")
    source = browser.find_element("id", "p-src").text
    assert source.startswith("test_explore.py:") and "return (y * y).sum() + y.mean()" in source
    k = int(hit.get_attribute("data-item"))
    i = nodes.index(page.items[k].node)
    assert browser.find_element("id", "p-cost").text == \
        f"time {1e-3 * (i + 1) * 1e3:g} ms · {64 * (i + 1)} B · {1000 * (i + 1)} FLOPs"
    js(browser, "const s = document.getElementById('overlay'); s.value = 'time';"
                "s.dispatchEvent(new Event('change'))")
    assert browser.find_element("id", "legend-title").text == "time (s), log scale"
    el = element_of(browser, k)
    assert js(browser, f"return document.querySelector('#{el} rect').style.fill") != ""
    assert js(browser, "return document.querySelector('.k-param rect').style.fill") == ""


# --- readable at first sight ------------------------------------------------------------------

def _demo_page():
    """The page the explore demo writes by default (the seq2seq step, depth 1)."""
    from minigrad.demos import explore as demo

    model, loss = demo.seq2seq_step(demo.parse_args([]))
    return mg.viz.explore(loss, model=model, depth=1)


def _node_texts(browser):
    """[(text, its size on screen in px, its colour, its node's fill)] of every node label:
    the fill of the node's front box (a module's 3-D back box is drawn first)."""
    return js(browser, """return [...document.querySelectorAll('.node')].flatMap((n) => {
        const boxes = n.querySelectorAll('rect'), box = boxes[boxes.length - 1];
        return [...n.querySelectorAll('text')].filter((t) => t.textContent.trim()).map((t) =>
            [t.textContent, parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a,
             getComputedStyle(t).fill, getComputedStyle(box).fill, t.classList.contains('sub')]);
    });""")


def _hex(rgb):
    return "#" + "".join(f"{int(float(v)):02x}" for v in re.findall(r"[\d.]+", rgb)[:3])


def _assert_contrast(texts, least=4.5):
    from minigrad.viz.colours import contrast

    low = [(round(contrast(_hex(fill), _hex(ink)), 2), text, ink, fill)
           for text, _, ink, fill, _ in texts if contrast(_hex(fill), _hex(ink)) < least]
    assert low == [], low[:5]


def test_browser_labels_are_readable_at_first_sight(browser, tmp_path):
    """The demo's page in a 1400 x 900 window, as first shown: node labels at least 11 px
    (their small print at least 10) and every label at WCAG AA contrast (4.5:1) with its
    node's fill: as drawn, under the gradient overlay, and while stepping backward."""
    size = browser.get_window_size()
    browser.set_window_size(1400, 900)
    try:
        open_page(browser, _demo_page(), tmp_path)
        texts = _node_texts(browser)
        assert len(texts) > 20
        names = [px for _, px, _, _, sub in texts if not sub]
        small = [px for _, px, _, _, sub in texts if sub]
        assert min(names) >= 11 - 1e-6 and min(small) >= 10 - 1e-6, (min(names), min(small))
        _assert_contrast(texts)
        assert "fit" in browser.find_element("id", "hint").text  # the rest is a drag away
        js(browser, "const s = document.getElementById('overlay'); s.value = 'grad';"
                    "s.dispatchEvent(new Event('change'));")
        overlaid = _node_texts(browser)
        assert len({fill for *_, fill, _ in overlaid}) > 3  # the overlay did fill the nodes
        _assert_contrast(overlaid)
        for _ in range(40):
            browser.find_element("id", "btn-step").click()
        stepped = _node_texts(browser)
        assert js(browser, "return document.querySelectorAll('.node.done').length") > 0
        _assert_contrast(stepped)
        browser.find_element("id", "btn-fit").click()  # the whole graph, on request
        assert js(browser, "return window.explorer.view.k") < 1
        assert browser.find_element("id", "hint").text == ""
    finally:
        browser.set_window_size(size["width"], size["height"])
