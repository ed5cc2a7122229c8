//! The whole-organism graph in a real browser (issue 47): laid out in columns by depth from
//! the client, no two labels overlapping; on a fresh host the routes
//! the listeners declare are drawn (dashed) before any traffic; over a history file the
//! listeners table has no empty column. Headless Chromium, axe-core on each view (see
//! tests/viewer.rs for what the browser tests need).

use crate::{demo, support};

use crate::browser;

use browser::Browser;
use support::Scratch;

const TOKEN: &str = "viewer-organism-token-0123456789";

/// Pairs of node labels whose boxes intersect in the graph shown; the lines drawn (one per
/// pair of participants, whichever way) and how many pairs of them cross, each line taken as
/// straight between its nodes' centres (lines sharing a node never count).
const GEOMETRY: &str = "
  const labels = [...document.querySelectorAll('#org-svg .org-node text')].map(t => [t.textContent, t.getBBox()]);
  const overlaps = [];
  for (let i = 0; i < labels.length; i++) for (let j = i + 1; j < labels.length; j++) {
    const [a, p] = labels[i], [b, q] = labels[j];
    if (p.x < q.x + q.width && q.x < p.x + p.width && p.y < q.y + q.height && q.y < p.y + p.height) overlaps.push(a + ' / ' + b);
  }
  const at = new Map([...document.querySelectorAll('#org-svg .org-node')].map(g => {
    const c = g.querySelector('circle');
    return [g.dataset.name, [+c.getAttribute('cx'), +c.getAttribute('cy')]];
  }));
  const seen = new Set(), lines = [];
  for (const e of document.querySelectorAll('#org-svg .org-edge')) {
    const [a, b] = [e.dataset.from, e.dataset.to];
    const key = [a, b].sort().join('|');
    if (a !== b && !seen.has(key)) { seen.add(key); lines.push([a, b]); }
  }
  const side = (p, q, r) => Math.sign((q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0]));
  let crossings = 0;
  for (let i = 0; i < lines.length; i++) for (let j = i + 1; j < lines.length; j++) {
    const [a, b] = lines[i], [c, d] = lines[j];
    if (new Set([a, b, c, d]).size < 4) continue;
    const [p, q, r, s] = [at.get(a), at.get(b), at.get(c), at.get(d)];
    if (side(p, q, r) * side(p, q, s) < 0 && side(r, s, p) * side(r, s, q) < 0) crossings++;
  }
  return { overlaps, lines: lines.length, crossings };";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_organism_graph_is_layered_and_shows_declared_routes_before_any_traffic() {
    // A fresh host: no traffic, the declared routes drawn dashed.
    let scratch = Scratch::new("viewer-organism-fresh");
    let fresh = demo(&scratch, false).await;
    let base = support::serve(&fresh, TOKEN, 1024 * 1024).await;
    let b = Browser::start(&scratch, false).await;
    b.goto(&format!("{base}/?token={TOKEN}#/organism")).await;
    b.until(
        "the organism's graph",
        "document.querySelectorAll('#org-svg .org-node').length > 10",
    )
    .await;
    b.until(
        "newton's declared route to the calculator, dashed",
        "!!document.querySelector(\"#org-svg .org-edge.declared[data-from='newton'][data-to='calculator']\")",
    )
    .await;
    let taken = b
        .eval("return [...document.querySelectorAll('#org-svg .org-edge:not(.declared)')].map(e => e.dataset.from + ' → ' + e.dataset.to)")
        .await;
    assert_eq!(
        taken,
        serde_json::json!([]),
        "no route taken yet (the pump's boot notice is its own, listed, not drawn)"
    );
    let dashed = b
        .eval("return getComputedStyle(document.querySelector('#org-svg .org-edge.declared .org-line')).strokeDasharray")
        .await;
    assert_ne!(dashed, "none", "declared routes are drawn differently");
    let geometry = b.eval(GEOMETRY).await;
    assert_eq!(geometry["overlaps"], serde_json::json!([]), "{geometry}");
    b.axe("organism, fresh host").await;
    b.close().await;

    // After the demo: every listener, routes taken; labels apart.
    let scratch = Scratch::new("viewer-organism-used");
    let used = demo(&scratch, true).await;
    let base = support::serve(&used, TOKEN, 1024 * 1024).await;
    let b = Browser::start(&scratch, false).await;
    b.goto(&format!("{base}/?token={TOKEN}#/organism")).await;
    b.until(
        "the organism's graph with routes taken",
        "document.querySelectorAll('#org-svg .org-edge:not(.declared)').length > 10",
    )
    .await;
    let geometry = b.eval(GEOMETRY).await;
    assert_eq!(geometry["overlaps"], serde_json::json!([]), "{geometry}");
    // Issue 47: on a circle the demo's graph had 53 crossing arrows.
    eprintln!("the demo's organism graph: {geometry}");
    let crossings = geometry["crossings"].as_u64().unwrap();
    assert!(crossings <= 10, "{geometry}");
    b.screenshot(&browser::shots(&scratch), "viewer-organism-whole.png")
        .await;
    b.axe("organism after the demo").await;

    // Over the history file: no listeners-table column is empty.
    let view = browser::View::start(&scratch.db());
    b.goto(&format!("{}#/organism", view.url)).await;
    b.until(
        "the listeners table over the file",
        "document.querySelectorAll('#org-listeners tbody tr').length > 5",
    )
    .await;
    let table = b
        .eval(
            "const t = document.getElementById('org-listeners'); \
             const shown = [...t.tHead.rows[0].cells].filter(c => !c.hidden).length; \
             return { shown, rows: [...t.tBodies[0].rows].map(r => [r.cells.length, [...r.cells].filter(c => !c.textContent.trim()).map(c => c.dataset.column || 'name')]) }",
        )
        .await;
    let shown = table["shown"].as_u64().unwrap();
    assert!(shown >= 2, "the names and what the history knows: {table}");
    for row in table["rows"].as_array().unwrap() {
        assert_eq!(row[0].as_u64(), Some(shown), "{table}");
        assert_eq!(row[1], serde_json::json!([]), "an empty cell: {table}");
    }
    b.axe("organism over a history file").await;
    b.close_clean().await;
}
