//! `report.html`: one self-contained page per run folder, for a reviewer who
//! reads one document, offline or forwarded. It is the Markdown reports'
//! own parts ([`comparison::parts`], [`markdown::parts`], the decision
//! record, a sweep's report) turned into HTML by [`mdhtml`], in the order a
//! decision is read: the findings with their intervals, the decision record,
//! the table, the charts inline, validity, configuration and environment,
//! and `run.json` embedded. One model, two renderers: every figure is the
//! Markdown's, character for character. Nothing is fetched: the styles and
//! the charts are inline, and the one script only opens the collapsed
//! sections before printing.

use std::fmt::Write;

use super::comparison::{self, Arm};
use super::mdhtml::{Images, escape, to_html};
use super::{adr, capacity, charts, markdown, payload};
use crate::judge::capacity::Capacity;
use crate::judge::payload::PayloadReport;
use crate::result::RunResult;

/// The page's styles: one column, colour-blind-safe accents (Okabe and Ito),
/// light and dark, a phone's width, and whole tables when printed.
const STYLE: &str = r#"
:root{color-scheme:light dark;--fg:#1b1b1b;--bg:#fff;--muted:#595959;--rule:#d0d0d0;--accent:#0072B2;--warn:#D55E00;--ok:#009E73;--code:#f2f2f2}
@media (prefers-color-scheme:dark){:root{--fg:#e6e6e6;--bg:#161616;--muted:#b0b0b0;--rule:#444;--accent:#56B4E9;--warn:#E69F00;--ok:#3fc5a0;--code:#262626}}
*{box-sizing:border-box}
body{font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg);max-width:76rem;margin:0 auto;padding:1rem 1.25rem}
h1{font-size:1.6rem;line-height:1.25;margin:.5rem 0}h2{font-size:1.3rem;border-bottom:2px solid var(--accent);padding-bottom:.15rem;margin-top:2.2rem}h3{font-size:1.1rem}
a{color:var(--accent)}code{background:var(--code);padding:0 .2em;border-radius:3px;font-size:.92em;overflow-wrap:anywhere}
pre{background:var(--code);padding:.6rem;overflow-x:auto;white-space:pre-wrap;overflow-wrap:anywhere}
blockquote{border-left:4px solid var(--warn);margin:1rem 0;padding:.1rem 1rem;background:color-mix(in srgb,var(--warn) 8%,transparent)}
.banner{border:2px solid var(--warn);padding:.5rem 1rem;font-weight:600}
.valid{border-color:var(--ok)}
nav ol{display:flex;flex-wrap:wrap;gap:.25rem 1rem;padding:0;margin:.5rem 0;list-style:none;font-size:.95rem}
.table{overflow-x:auto;margin:.75rem 0}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:.92rem}
th,td{border-bottom:1px solid var(--rule);padding:.25rem .5rem;text-align:left;vertical-align:top}
th{position:sticky;top:0;background:var(--bg)}
td.num,th.num{text-align:right;white-space:nowrap}
tbody tr:nth-child(even){background:color-mix(in srgb,var(--fg) 4%,transparent)}
figure.chart{margin:1rem 0;break-inside:avoid}
figure.chart svg{display:block;max-width:100%;height:auto;background:#fff;border:1px solid var(--rule)}
figcaption{color:var(--muted);font-size:.9rem}
details{margin:.75rem 0;border:1px solid var(--rule);padding:.25rem .75rem}
summary{cursor:pointer;font-weight:600}
.meta,.data{font-size:.85rem;color:var(--muted)}
@media (max-width:40rem){body{font-size:15px;padding:.5rem}h1{font-size:1.3rem}table{font-size:.8rem}}
@media print{
 body{max-width:none;padding:0;font-size:10pt;color:#000;background:#fff}
 nav,summary{display:none}details{border:0;padding:0}
 .table{overflow:visible}table{width:100%;font-size:7.5pt}th{position:static}
 td,th{overflow-wrap:break-word}td.num,th.num{white-space:nowrap}
 tr,figure,blockquote{break-inside:avoid}h2,h3{break-after:avoid}
 a{color:inherit;text-decoration:none}
}
"#;

/// Opens every collapsed section before printing, so the PDF is the whole record.
const PRINT_SCRIPT: &str =
    "addEventListener('beforeprint',()=>document.querySelectorAll('details').forEach(d=>d.open=true));";

/// JSON inside `<script type="application/json">`: `<`, `>` and `&` as JSON
/// escapes, so no text in it can close the element; still the same JSON.
pub fn json_for_script(json: &str) -> String {
    json.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026")
}

/// A page section of Markdown: `<section id=…>` around its HTML.
fn section(id: &str, md: &str, images: Images<'_>) -> String {
    if md.trim().is_empty() {
        return String::new();
    }
    format!("<section id=\"{id}\">\n{}</section>\n", to_html(md, 0, images))
}

/// The data embedded at the end: each `(name, JSON)` in a script element
/// that no browser runs (`type="application/json"`).
fn data_section(what: &str, data: &[(String, String)]) -> String {
    let mut out = String::from("<section id=\"data\">\n<h2>Raw data</h2>\n");
    let _ = writeln!(
        out,
        "<p class=\"data\">The whole record is embedded in this page: {what} in <code>&lt;script \
         type=\"application/json\"&gt;</code> elements (ids below), the same JSON as the files beside it.</p>\n<ul>"
    );
    for (id, _) in data {
        let _ = writeln!(out, "<li><code>{}</code></li>", escape(id));
    }
    out.push_str("</ul>\n");
    for (id, json) in data {
        let _ =
            writeln!(out, "<script type=\"application/json\" id=\"{}\">{}</script>", escape(id), json_for_script(json));
    }
    out.push_str("</section>\n");
    out
}

/// The whole document: `title` (already HTML-escaped text), the contents
/// line, the body.
fn page(title: &str, nav: &[(&str, &str)], body: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" \
         content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
    );
    out.push_str("<nav aria-label=\"contents\"><ol>");
    for (id, what) in nav {
        let _ = write!(out, "<li><a href=\"#{id}\">{what}</a></li>");
    }
    out.push_str("</ol></nav>\n");
    out.push_str(body);
    let _ = write!(out, "<script>{PRINT_SCRIPT}</script>\n</body>\n</html>\n");
    out
}

/// The `# …` heading of a part, as plain escaped text for `<title>`.
fn title_text(md: &str) -> String {
    escape(md.lines().next().unwrap_or("").trim_start_matches('#').trim())
}

fn run_json(run: &RunResult) -> String {
    serde_json::to_string(run).unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string()))
}

/// A banner naming the arms that were not valid measurements, linking to why.
fn validity_banner(invalid: &[&str]) -> String {
    match invalid {
        [] => "<p class=\"banner valid\">Every arm was a valid measurement (see <a href=\"#validity\">Validity</a>).</p>\n"
            .to_owned(),
        names => format!(
            "<p class=\"banner\">Not a valid measurement: {} (see <a href=\"#validity\">Validity</a>); no basis for a \
             choice.</p>\n",
            escape(&names.join(", "))
        ),
    }
}

/// `report.html` of a comparison (`--transport both`, arms, merged arms):
/// findings, the decision record (`decision`, the text of decision.md, when
/// one was written), cost, the table, charts, validity, configuration,
/// environment, each arm's report and each arm's run.json.
pub fn comparison_page(arms: &[Arm<'_>], decision: Option<&str>) -> String {
    let p = comparison::parts(arms);
    let named: Vec<(String, &RunResult)> = arms.iter().map(|a| (a.name.to_owned(), a.run)).collect();
    let images = charts::all(&named);
    let mut body = to_html(&p.title, 0, &[]);
    body.push_str(&to_html(&p.setup, 0, &[]));
    body.push_str(&validity_banner(&comparison::not_valid(arms)));
    body.push_str(&section("findings", &format!("{}{}", p.findings, p.replicas), &[]));
    body.push_str(&section("cost", &p.cost, &[]));
    if let Some(record) = decision {
        let _ = write!(
            body,
            "<section id=\"decision\">\n<h2>Decision record</h2>\n{}</section>\n",
            to_html(record, 2, &[])
        );
    }
    body.push_str(&section("attribution", &p.attribution, &[]));
    body.push_str(&section("table", &format!("{}{}", p.table, p.method), &[]));
    body.push_str(&section("charts", &markdown::charts_section(), &images));
    body.push_str(&section("validity", &p.validity, &[]));
    body.push_str(&section("configuration", &p.configuration, &[]));
    body.push_str(&section("environment", &p.environment, &[]));
    body.push_str("<section id=\"arms\">\n<h2>Each arm's report</h2>\n");
    for a in arms {
        let _ = write!(
            body,
            "<details><summary>{}</summary>\n{}</details>\n",
            escape(a.name),
            to_html(&markdown::parts(a.run).markdown(), 2, &[])
        );
    }
    body.push_str("</section>\n");
    let data: Vec<(String, String)> =
        arms.iter().map(|a| (format!("run-json-{}", a.run.config.transport.as_str()), run_json(a.run))).collect();
    body.push_str(&data_section("each arm's run.json", &data));
    let mut nav = vec![("findings", "Findings"), ("cost", "Cost")];
    if decision.is_some() {
        nav.push(("decision", "Decision record"));
    }
    nav.extend([
        ("table", "All rows"),
        ("charts", "Charts"),
        ("validity", "Validity"),
        ("configuration", "Configuration"),
        ("environment", "Environment"),
        ("arms", "Each arm"),
        ("data", "Raw data"),
    ]);
    page(&title_text(&p.title), &nav, &body)
}

/// `report.html` of one arm: its figures round by round, validity, charts,
/// configuration, environment and its run.json.
pub fn run_page(run: &RunResult) -> String {
    let p = markdown::parts(run);
    let name = super::arm_names(&[run]).remove(0);
    let images = charts::all(&[(name, run)]);
    let mut body = to_html(&p.title, 0, &[]);
    body.push_str(&to_html(&p.warnings, 0, &[]));
    body.push_str(&validity_banner(&if run.is_valid() { vec![] } else { vec![run.config.transport.title()] }));
    let figures = format!("## Figures by round\n\n{}{}", p.table, p.details);
    body.push_str(&section("figures", &figures, &[]));
    body.push_str(&section("charts", &markdown::charts_section(), &images));
    body.push_str(&section("validity", &p.validity, &[]));
    body.push_str(&section("configuration", &p.configuration, &[]));
    body.push_str(&section("environment", &p.environment, &[]));
    body.push_str(&data_section("run.json", &[("run-json".to_owned(), run_json(run))]));
    let nav = [
        ("figures", "Figures"),
        ("charts", "Charts"),
        ("validity", "Validity"),
        ("configuration", "Configuration"),
        ("environment", "Environment"),
        ("data", "Raw data"),
    ];
    page(&title_text(&p.title), &nav, &body)
}

/// `report.html` of a rate sweep: `capacity.md` with its charts inline, and
/// capacity.json.
pub fn capacity_page(c: &Capacity, setup: &str) -> String {
    let md = capacity::render(c, setup);
    let body = format!(
        "<section id=\"sweep\">\n{}</section>\n{}",
        to_html(&md, 0, &capacity::charts(c)),
        data_section("capacity.json", &[("capacity-json".to_owned(), capacity::json(c))])
    );
    page(&title_text(&md), &[("sweep", "Sweep"), ("data", "Raw data")], &body)
}

/// `report.html` of a payload sweep: `payload.md` with its charts inline,
/// and payload.json.
pub fn payload_page(p: &PayloadReport, setup: &str) -> String {
    let md = payload::render(p, setup);
    let body = format!(
        "<section id=\"sweep\">\n{}</section>\n{}",
        to_html(&md, 0, &payload::charts(p)),
        data_section("payload.json", &[("payload-json".to_owned(), payload::json(p))])
    );
    page(&title_text(&md), &[("sweep", "Sweep"), ("data", "Raw data")], &body)
}

/// `report.html` of an experiment: its `summary.md` with the charts per axis
/// inline, its `decision.md` (where each option wins), and `experiment.json`. Each cell's own folder has its own page.
pub fn experiment_page(e: &super::experiment::Shown<'_>, json: &str) -> String {
    let md = super::experiment::render(e);
    let charts = super::experiment::chart_files(e);
    let images: Vec<(&str, String)> = charts.iter().map(|(f, svg)| (f.as_str(), svg.clone())).collect();
    let body = format!(
        "<section id=\"experiment\">\n{}</section>\n{}{}",
        to_html(&md, 0, &images),
        section("decision", &super::experiment::decision(e), &[]),
        data_section("experiment.json", &[("experiment-json".to_owned(), json.to_owned())])
    );
    let nav = [("experiment", "Experiment"), ("decision", "Where each wins"), ("data", "Raw data")];
    page(&title_text(&md), &nav, &body)
}

/// The decision record a comparison folder holds, as `files` writes it, for
/// [`comparison_page`]: `None` for an A/A run or more than two arms.
pub fn decision_text(arms: &[Arm<'_>]) -> Option<String> {
    if arms.len() != 2 || comparison::is_a_a(arms) {
        return None;
    }
    let date = arms[0].run.started_at.get(..10).unwrap_or(&arms[0].run.started_at);
    Some(adr::render(arms, &adr::Record { date, prefer: None, folder: "" }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{table_cells, visible_text};

    #[test]
    fn every_figure_of_comparison_md_is_in_report_html() {
        let (g, r) = crate::testing::both(5, 0.45, 1.0);
        let arms = [Arm { name: "gRPC", run: &g }, Arm { name: "REST", run: &r }];
        let md = comparison::render(&arms, true);
        let html = comparison_page(&arms, decision_text(&arms).as_deref());
        let text = visible_text(&html);
        let cells = table_cells(&md);
        assert!(cells.len() > 100, "{}", cells.len());
        for cell in cells {
            assert!(text.contains(&cell), "{cell:?} is not in report.html");
        }
        // The order a decision is read in.
        let at = |id: &str| html.find(&format!("<section id=\"{id}\">")).unwrap_or_else(|| panic!("no {id}"));
        assert!(at("findings") < at("decision") && at("decision") < at("table") && at("table") < at("charts"));
        assert!(at("charts") < at("validity") && at("validity") < at("environment"));
        assert_eq!(html.matches("<svg").count(), 4, "every chart inline");
    }

    #[test]
    fn a_label_is_text_and_nothing_is_fetched() {
        let mut run = crate::testing::run(caller::Transport::Grpc, 1.0);
        run.config.output.label = Some("<img src=x onerror=alert(1)></script><script>alert(2)</script>".into());
        let html = run_page(&run);
        assert!(!html.contains("<img") && !html.contains("<script>alert"), "a label became markup");
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"), "the label is not shown as text");
        // The run.json embedded cannot close its element either.
        let data = &html[html.find("id=\"run-json\">").unwrap()..];
        assert!(data[..data.find("</script>").unwrap()].contains("\\u003cimg"));
        for attr in ["src=\"http", "href=\"http", "url(", "@import"] {
            assert!(!html.contains(attr), "{attr} in the page");
        }
    }
}
