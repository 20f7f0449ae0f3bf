//! A report.html in a real browser: headless Chromium (Debian's `chromium`)
//! loads the file with the network off (a network namespace of its own when
//! the test runs as root, and a proxy that goes nowhere either way), dumps
//! the DOM it built and logs every request it made (`--log-net-log`). The
//! page's own requests are those with an initiator (the file's origin);
//! Chromium's background requests have none ("not an origin") and are not
//! the page's. Without Chromium a test says so and checks nothing here.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Chromium's path, or `None` with the reason printed (a test then skips
/// its browser part).
pub fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser"]
        .iter()
        .find_map(|name| std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file()));
    if found.is_none() {
        eprintln!("skipped: the browser check needs chromium (apt-get install chromium), which is not installed");
    }
    found
}

/// What the browser made of a page.
#[derive(Debug)]
pub struct Loaded {
    /// The DOM after loading, serialised.
    pub dom: String,
    /// The URLs the page itself asked for.
    pub requests: Vec<String>,
}

fn browser(chrome: &Path, work: &Path) -> Command {
    // /proc/self belongs to this process's effective user.
    let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0;
    let unshare = Path::new("/usr/bin/unshare");
    let mut cmd = if root && unshare.is_file() {
        let mut c = Command::new(unshare);
        c.arg("-n").arg(chrome);
        c
    } else {
        Command::new(chrome)
    };
    cmd.args([
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--proxy-server=127.0.0.1:9",
        "--host-resolver-rules=MAP * ~NOTFOUND",
    ]);
    cmd.arg(format!("--user-data-dir={}", work.join("profile").display()));
    cmd
}

/// Loads `page` and returns its DOM and the requests it made; with
/// `screenshot`, also saves a 1280-pixel-wide PNG of it there.
pub fn load(chrome: &Path, page: &Path, screenshot: Option<&Path>) -> Loaded {
    let page = page.canonicalize().unwrap();
    let work = std::env::temp_dir().join(format!("gvr-browser-{}-{}", std::process::id(), unique()));
    std::fs::create_dir_all(&work).unwrap();
    let netlog = work.join("net.json");
    let o = browser(chrome, &work)
        .arg(format!("--log-net-log={}", netlog.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "chromium failed on {}: {}", page.display(), String::from_utf8_lossy(&o.stderr));
    let dom = String::from_utf8_lossy(&o.stdout).into_owned();
    let requests = page_requests(&std::fs::read_to_string(&netlog).unwrap());
    if let Some(png) = screenshot {
        let o = browser(chrome, &work)
            .arg(format!("--screenshot={}", png.display()))
            .arg("--window-size=1280,2000")
            .arg("--hide-scrollbars")
            .arg(format!("file://{}", page.display()))
            .output()
            .unwrap();
        assert!(o.status.success(), "chromium screenshot failed: {}", String::from_utf8_lossy(&o.stderr));
        let bytes = std::fs::read(png).unwrap();
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 10_000, "not a screenshot: {}", png.display());
    }
    let _ = std::fs::remove_dir_all(&work);
    Loaded { dom, requests }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// The URLs of the requests the page started, from Chromium's net log: every
/// `URL_REQUEST_START_JOB` with an initiator (a page's origin, `null` for a
/// file) that is not a `file:` or `data:` URL.
pub fn page_requests(netlog: &str) -> Vec<String> {
    let log: serde_json::Value = serde_json::from_str(netlog).expect("the net log is JSON");
    let start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"].as_u64().expect("the event type is named");
    log["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"].as_u64() == Some(start))
        .filter(|e| e["params"]["initiator"].as_str() != Some("not an origin"))
        .filter_map(|e| e["params"]["url"].as_str().map(str::to_owned))
        .filter(|url| !url.starts_with("file:") && !url.starts_with("data:"))
        .collect()
}

/// The page as the browser built it: nothing fetched or fetchable (no
/// element that loads, no address with a scheme in `src` or `href`), the
/// sections `sections` there, and `charts` charts, each an inline SVG.
pub fn check(loaded: &Loaded, sections: &[&str], charts: usize) {
    let dom = &loaded.dom;
    assert!(loaded.requests.is_empty(), "the page made requests: {:?}", loaded.requests);
    for tag in ["<img", "<iframe", "<link", "<object", "<embed", "<video", "<audio", "<script src"] {
        assert!(!dom.contains(tag), "{tag} in the DOM");
    }
    for attr in [" src=\"", " href=\"", " xlink:href=\""] {
        for (at, _) in dom.match_indices(attr) {
            let value = &dom[at + attr.len()..];
            let value = &value[..value.find('"').unwrap_or(value.len())];
            assert!(!value.contains("://") && !value.starts_with("//"), "{attr}{value} leaves the page");
        }
    }
    assert!(!dom.contains("url(http") && !dom.contains("@import"), "the styles fetch something");
    for id in sections {
        assert!(dom.contains(&format!("<section id=\"{id}\">")), "no {id} section in the DOM");
    }
    let figures: Vec<&str> = dom.split("<figure class=\"chart\"").skip(1).collect();
    assert_eq!(figures.len(), charts, "charts in the DOM");
    for f in figures {
        let f = &f[..f.find("</figure>").unwrap()];
        assert!(f.contains("<svg") && f.contains("</svg>"), "a chart without its SVG");
    }
    assert!(!dom.contains("class=\"missing\""), "a chart the page does not hold");
}

/// Checks a run folder's report.html in the browser, when there is one:
/// the sections of its kind and `charts` charts.
pub fn check_folder(folder: &Path, sections: &[&str], charts: usize) {
    let page = folder.join("report.html");
    assert!(page.is_file(), "no report.html in {}", folder.display());
    if let Some(chrome) = chromium() {
        check(&load(&chrome, &page, None), sections, charts);
    }
}

/// The sections of a comparison of two options.
pub const DECISION: &[&str] =
    &["findings", "cost", "decision", "table", "charts", "validity", "configuration", "environment", "data"];
/// The sections of a comparison of more than two arms (no decision record).
pub const ARMS: &[&str] = &["findings", "cost", "table", "charts", "validity", "configuration", "environment", "data"];
/// The sections of one arm's page.
pub const ONE_ARM: &[&str] = &["figures", "charts", "validity", "configuration", "environment", "data"];
/// The sections of a sweep's page.
pub const SWEEP: &[&str] = &["sweep", "data"];

/// Every table cell of the Markdown file `md` is in the HTML file `html`'s
/// text, character for character.
pub fn same_figures(md: &Path, html: &Path) {
    let md = std::fs::read_to_string(md).unwrap();
    let text = harness::testing::visible_text(&std::fs::read_to_string(html).unwrap());
    let cells = harness::testing::table_cells(&md);
    assert!(cells.len() > 20, "only {} cells", cells.len());
    for cell in cells {
        assert!(text.contains(&cell), "{cell:?} of the Markdown is not in {}", html.display());
    }
}
