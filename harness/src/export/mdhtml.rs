//! The Markdown the other renderers write, turned into HTML for
//! `report.html`: the same text, so every figure is character for character
//! the one in the Markdown. Only the subset those renderers use is read
//! (headings, pipe tables, lists, block quotes, fenced code, a front matter,
//! `code`, **bold**, *emphasis*, links and images); everything else is text.
//! Every character of text is escaped: nothing in a label, a contract name
//! or a file name can become markup. Links go only to places inside the run
//! folder or the page (a link with a scheme is shown as text), and an image
//! is the inline SVG [`Images`] holds for its file, never a fetch.

use std::fmt::Write;

/// The inline SVGs of a page by file name (`latency.svg`), for `![…](file)`.
pub type Images<'a> = &'a [(&'a str, String)];

/// `text` with `&`, `<`, `>`, `"` and `'` escaped: safe in text and in a
/// quoted attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// An id for a heading: lower-case letters and digits joined by `-`.
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

/// Converts `md` to HTML, every heading `shift` levels deeper (at most h6).
pub fn to_html(md: &str, shift: usize, images: Images<'_>) -> String {
    let mut out = String::new();
    let lines: Vec<&str> = md.lines().collect();
    let mut i = front_matter(&lines, &mut out);
    while i < lines.len() {
        i = block(&lines, i, shift, images, &mut out);
    }
    out
}

/// A YAML front matter (`---` … `---`, as a MADR record opens), kept as text.
fn front_matter(lines: &[&str], out: &mut String) -> usize {
    if lines.first() != Some(&"---") {
        return 0;
    }
    let Some(end) = lines.iter().skip(1).position(|l| *l == "---") else { return 0 };
    let _ = writeln!(out, "<pre class=\"meta\">{}</pre>", escape(&lines[1..=end].join("\n")));
    end + 2
}

/// One block starting at `lines[i]`; returns the line after it.
fn block(lines: &[&str], i: usize, shift: usize, images: Images<'_>, out: &mut String) -> usize {
    let line = lines[i];
    let trimmed = line.trim_start();
    if trimmed.is_empty() {
        return i + 1;
    }
    if let Some((level, text)) = heading(line) {
        let n = (level + shift).min(6);
        let _ = writeln!(out, "<h{n}>{}</h{n}>", inline(text, images));
        return i + 1;
    }
    if trimmed.starts_with("```") {
        let end =
            lines[i + 1..].iter().position(|l| l.trim_start().starts_with("```")).map_or(lines.len(), |p| i + 1 + p);
        let _ = writeln!(out, "<pre><code>{}</code></pre>", escape(&lines[i + 1..end].join("\n")));
        return (end + 1).min(lines.len());
    }
    if line.starts_with('|') {
        let end = run_of(lines, i, |l| l.starts_with('|'));
        table(&lines[i..end], images, out);
        return end;
    }
    if line.starts_with('>') {
        let end = run_of(lines, i, |l| l.starts_with('>'));
        let inner: Vec<&str> =
            lines[i..end].iter().map(|l| l.strip_prefix("> ").or_else(|| l.strip_prefix('>')).unwrap_or(l)).collect();
        let _ = writeln!(out, "<blockquote>\n{}</blockquote>", to_html(&inner.join("\n"), shift, images));
        return end;
    }
    if list_item(line).is_some() {
        let end = run_of(lines, i, |l| !l.trim().is_empty() && (list_item(l).is_some() || l.starts_with(' ')));
        list(&lines[i..end], images, out);
        return end;
    }
    let end = run_of(lines, i, |l| {
        !l.trim().is_empty()
            && heading(l).is_none()
            && !l.starts_with('|')
            && !l.starts_with('>')
            && list_item(l).is_none()
    })
    .max(i + 1);
    let text = lines[i..end].iter().map(|l| l.trim()).collect::<Vec<_>>().join("\n");
    if let Some((alt, src)) = lone_image(&text) {
        let _ = writeln!(out, "{}", figure(alt, src, images));
    } else {
        let _ = writeln!(out, "<p>{}</p>", inline(&text, images));
    }
    end
}

/// The first line at or after `from` that does not satisfy `keep`.
fn run_of(lines: &[&str], from: usize, keep: impl Fn(&str) -> bool) -> usize {
    lines[from..].iter().position(|l| !keep(l)).map_or(lines.len(), |p| from + p)
}

fn heading(line: &str) -> Option<(usize, &str)> {
    let level = line.chars().take_while(|c| *c == '#').count();
    let text = line[level..].strip_prefix(' ')?;
    (1..=6).contains(&level).then_some((level, text.trim()))
}

/// A list item's indent and text: `  - text`, `* text`, `3. text`.
fn list_item(line: &str) -> Option<(usize, &str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    if let Some(text) = rest.strip_prefix("- ").or_else(|| rest.strip_prefix("* ")) {
        return Some((indent, text));
    }
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let text = rest[digits..].strip_prefix(". ").filter(|_| digits > 0)?;
    Some((indent, text))
}

/// Nested lists by indentation; an indented line that is no item continues
/// the item before it.
fn list(lines: &[&str], images: Images<'_>, out: &mut String) {
    let mut open: Vec<usize> = Vec::new();
    let mut item: Option<String> = None;
    let flush = |item: &mut Option<String>, out: &mut String| {
        if let Some(text) = item.take() {
            out.push_str(&inline(&text, images));
        }
    };
    for line in lines {
        let Some((indent, text)) = list_item(line) else {
            if let Some(t) = item.as_mut() {
                t.push('\n');
                t.push_str(line.trim());
            }
            continue;
        };
        flush(&mut item, out);
        while open.last().is_some_and(|&o| o > indent) {
            open.pop();
            out.push_str("</li></ul>");
        }
        if open.last() == Some(&indent) {
            out.push_str("</li>");
        } else {
            open.push(indent);
            out.push_str("<ul>");
        }
        out.push_str("<li>");
        item = Some(text.to_owned());
    }
    flush(&mut item, out);
    for _ in open {
        out.push_str("</li></ul>");
    }
    out.push('\n');
}

/// A row's cells, split at every `|` not escaped as `\|`.
fn cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').filter(|s| !s.ends_with('\\')).unwrap_or(inner);
    let mut cells = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '|' {
            cells.push(String::new());
            continue;
        }
        let c = if c == '\\' && chars.peek() == Some(&'|') { chars.next().unwrap_or(c) } else { c };
        if let Some(cell) = cells.last_mut() {
            cell.push(c);
        }
    }
    cells.into_iter().map(|c| c.trim().to_owned()).collect()
}

fn is_separator(row: &str) -> bool {
    let c = cells(row);
    !c.is_empty() && c.iter().all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':')))
}

/// A pipe table: its header, its alignment row, its body; in a scrolling box
/// on a narrow screen, whole in print.
fn table(rows: &[&str], images: Images<'_>, out: &mut String) {
    let (head, body) = match rows {
        [h, sep, rest @ ..] if is_separator(sep) => (Some((*h, cells(sep))), rest),
        all => (None, all),
    };
    let right: Vec<bool> = head.as_ref().map(|(_, s)| s.iter().map(|c| c.ends_with(':')).collect()).unwrap_or_default();
    let cell = |tag: &str, i: usize, text: &str| {
        let class = if right.get(i).copied().unwrap_or(false) { " class=\"num\"" } else { "" };
        format!("<{tag}{class}>{}</{tag}>", inline(text, images))
    };
    out.push_str("<div class=\"table\"><table>\n");
    if let Some((h, _)) = head {
        let header: String = cells(h).iter().enumerate().map(|(i, c)| cell("th", i, c)).collect();
        let _ = writeln!(out, "<thead><tr>{header}</tr></thead>");
    }
    out.push_str("<tbody>\n");
    for row in body {
        let line: String = cells(row).iter().enumerate().map(|(i, c)| cell("td", i, c)).collect();
        let _ = writeln!(out, "<tr>{line}</tr>");
    }
    out.push_str("</tbody></table></div>\n");
}

/// `![alt](src)` alone in a paragraph.
fn lone_image(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix("![")?;
    let (alt, rest) = rest.split_once("](")?;
    let src = rest.strip_suffix(')')?;
    (!src.contains(')') && !alt.contains(']')).then_some((alt, src))
}

/// An image as a figure: its inline SVG, or its description where the page
/// holds no SVG of that name.
fn figure(alt: &str, src: &str, images: Images<'_>) -> String {
    match images.iter().find(|(name, _)| *name == src) {
        Some((_, svg)) => format!(
            "<figure class=\"chart\" id=\"chart-{}\">{}<figcaption>{}</figcaption></figure>",
            slug(src),
            inline_svg(svg),
            escape(alt)
        ),
        None => format!("<p class=\"missing\">[{}: {}]</p>", escape(alt), escape(src)),
    }
}

/// A chart's SVG as an element of the page: without any XML declaration,
/// scaling to the width it is given.
pub fn inline_svg(svg: &str) -> String {
    let start = svg.find("<svg").unwrap_or(0);
    svg[start..].trim_end().to_owned()
}

/// Whether `href` stays inside the folder or the page: no scheme, no host.
fn local(href: &str) -> bool {
    !href.starts_with("//") && !href.split(['/', '#', '?']).next().unwrap_or("").contains(':')
}

/// Inline markup in `text`: code spans, bold, emphasis, links and images;
/// every other character escaped.
pub fn inline(text: &str, images: Images<'_>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some((html, used)) = span(rest, images) {
            out.push_str(&html);
            rest = &rest[used..];
            continue;
        }
        match c {
            '\n' => out.push(' '),
            '\\' if rest[1..].starts_with(['|', '*', '`', '[', ']', '\\', '_']) => {
                out.push_str(&escape(&rest[1..2]));
                rest = &rest[2..];
                continue;
            }
            c => out.push_str(&escape(c.encode_utf8(&mut [0; 4]))),
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The markup span `s` starts with, as HTML, and how many bytes it took.
fn span(s: &str, images: Images<'_>) -> Option<(String, usize)> {
    if let Some(body) = s.strip_prefix('`') {
        let end = body.find('`')?;
        return Some((format!("<code>{}</code>", escape(&body[..end])), end + 2));
    }
    if let Some(body) = s.strip_prefix("**") {
        let end = body.find("**").filter(|&e| e > 0)?;
        return Some((format!("<strong>{}</strong>", inline(&body[..end], images)), end + 4));
    }
    if let Some(body) = s.strip_prefix('*').filter(|b| b.starts_with(|c: char| !c.is_whitespace() && c != '*')) {
        let end = body.find('*').filter(|&e| !body[..e].ends_with(' '))?;
        return Some((format!("<em>{}</em>", inline(&body[..end], images)), end + 2));
    }
    if let Some(body) = s.strip_prefix("![") {
        let (alt, after) = body.split_once("](")?;
        let src = &after[..after.find(')')?];
        return Some((figure(alt, src, images), 2 + alt.len() + 2 + src.len() + 1));
    }
    if let Some(body) = s.strip_prefix('[') {
        let (label, after) = body.split_once("](")?;
        if label.contains('[') {
            return None;
        }
        let href = &after[..after.find(')')?];
        let used = 1 + label.len() + 2 + href.len() + 1;
        let text = inline(label, images);
        return Some(if local(href) {
            (format!("<a href=\"{}\">{text}</a>", escape(href)), used)
        } else {
            (format!("{text} ({})", escape(href)), used)
        });
    }
    if let Some(body) = s.strip_prefix('<') {
        // An autolink (`<https://…>`): its address as text.
        let end = body.find('>')?;
        let url = &body[..end];
        return url.contains("://").then(|| (escape(url), end + 2));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_becomes_html_and_text_stays_text() {
        let md = "# Title: <script>\n\nA **bold** `x<y` and *it* [run](grpc/run.json) [out](https://e.x/a).\n\n\
                  | a | b |\n|---|---:|\n| x \\| y | 1.5 |\n\n- one\n  - two <img>\n- three\n\n> **note**\n> more\n";
        let html = to_html(md, 1, &[]);
        assert!(html.contains("<h2>Title: &lt;script&gt;</h2>"), "{html}");
        assert!(html.contains("<strong>bold</strong> <code>x&lt;y</code> and <em>it</em>"), "{html}");
        assert!(html.contains("<a href=\"grpc/run.json\">run</a>"), "{html}");
        assert!(html.contains("out (https://e.x/a)") && !html.contains("href=\"https"), "{html}");
        assert!(html.contains("<td>x | y</td><td class=\"num\">1.5</td>"), "{html}");
        assert!(html.contains("<ul><li>one<ul><li>two &lt;img&gt;</li></ul></li><li>three</li></ul>"), "{html}");
        assert!(html.contains("<blockquote>\n<p><strong>note</strong> more</p>"), "{html}");
        assert!(!html.contains("<script") && !html.contains("<img"), "{html}");
    }

    #[test]
    fn an_image_is_its_inline_svg_and_a_front_matter_stays_text() {
        let svg = "<?xml version=\"1.0\"?><svg viewBox=\"0 0 1 1\"></svg>".to_owned();
        let html = to_html(
            "---\nstatus: proposed\n---\n\n![Latency](latency.svg)\n\n![Gone](gone.svg)\n",
            0,
            &[("latency.svg", svg)],
        );
        assert!(html.starts_with("<pre class=\"meta\">status: proposed</pre>"), "{html}");
        assert!(html.contains("<figure class=\"chart\" id=\"chart-latency-svg\"><svg viewBox"), "{html}");
        assert!(!html.contains("<?xml"), "{html}");
        assert!(html.contains("[Gone: gone.svg]"), "{html}");
    }

    #[test]
    fn only_links_inside_the_folder_are_links() {
        assert!(local("grpc/report.md") && local("#findings") && local("a/b:c"));
        assert!(!local("https://x") && !local("javascript:alert(1)") && !local("//host/x") && !local("a:b/c"));
    }
}
