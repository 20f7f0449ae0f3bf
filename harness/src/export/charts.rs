//! SVG charts (plotters' SVG backend: text stays text, no fonts needed), one
//! series per arm or per arm and tier: latency by percentile on a log "1 in N"
//! axis as HdrHistogram plots it, RSS and CPU over time, achieved rate and
//! requests in flight over time.

use hdrhistogram::Histogram;
use plotters::prelude::*;

use crate::measure::histogram::{decode_histogram, new_histogram};
use crate::result::{RunResult, TierName};

const SIZE: (u32, u32) = (900, 520);

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

fn bounds(series: &[Series]) -> (f64, f64, f64, f64) {
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (0.0, 1.0, 0.0, 1.0)
    } else {
        (x0, if x1 > x0 { x1 } else { x0 + 1.0 }, 0.0, if y1 > 0.0 { y1 * 1.08 } else { 1.0 })
    }
}

/// The y range of a latency chart: scaled to the data, so a 500–523 ms
/// spread fills the chart instead of lying flat on an axis from 0; the axis
/// label says where it starts.
pub fn y_range(series: &[Series]) -> (f64, f64) {
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (lo, hi) = ys.fold((f64::MAX, f64::MIN), |(lo, hi), y| (lo.min(y), hi.max(y)));
    if lo > hi {
        return (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.001).max(0.01);
    ((lo - pad).max(0.0), hi + pad)
}

/// CPU as % of one core over windows of at least `window` seconds, from the
/// samples' CPU seconds: per-sample readings over a quarter second jump by a
/// clock tick; a second's worth reads steadily. Samples without CPU seconds
/// (older runs) fall back on their own CPU %.
pub fn cpu_over(samples: &[&crate::result::ResourceSample], window: f64) -> Vec<(f64, f64)> {
    if samples.iter().any(|s| s.cpu_seconds.is_none()) {
        return samples.iter().filter_map(|s| Some((s.t_seconds, s.cpu_percent?))).collect();
    }
    let mut out = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        let earlier = samples[..i].iter().rev().find(|e| s.t_seconds - e.t_seconds >= window);
        if let (Some(e), Some(now), Some(then)) = (earlier, s.cpu_seconds, earlier.and_then(|e| e.cpu_seconds)) {
            out.push((s.t_seconds, (now - then).max(0.0) / (s.t_seconds - e.t_seconds) * 100.0));
        }
    }
    out
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// A measured round on a time axis: shaded under the lines and named below
/// the plot (`gRPC r2`), so every stretch of a series says which arm and
/// round it measured.
#[derive(Debug, Clone)]
pub struct Band {
    pub from: f64,
    pub to: f64,
    pub name: String,
    /// The arm's position: its shade.
    pub arm: usize,
}

/// One plot of a chart: its title, y axis and series.
struct Panel<'a> {
    title: &'a str,
    y_desc: &'a str,
    series: &'a [Series],
}

/// Legend entries per row, and the strip's height below a plot for `n`
/// entries (and a row of round names when `bands`).
fn legend_layout(n: usize, bands: bool) -> (usize, u32) {
    let per_row = (SIZE.0 as usize - LEGEND_LEFT as usize) / LEGEND_ENTRY as usize;
    let rows = n.div_ceil(per_row.max(1)) as u32;
    (per_row.max(1), rows * 18 + if bands { 20 } else { 0 } + 8)
}

const LEGEND_LEFT: i32 = 68;
const LEGEND_ENTRY: i32 = 200;

/// Draws `panels` stacked, each with its legend in a strip of its own below
/// the plot (never over the data) and `bands` shaded and named.
fn chart(panels: &[Panel<'_>], x_desc: &str, bands: &[Band]) -> String {
    let strips: Vec<u32> = panels.iter().map(|p| legend_layout(p.series.len(), !bands.is_empty()).1).collect();
    let plot_h = if panels.len() == 1 { SIZE.1 } else { SIZE.1 * 3 / 4 };
    let height = strips.iter().map(|s| plot_h + s).sum();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (SIZE.0, height)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let mut rest = root.clone();
        for (p, strip) in panels.iter().zip(&strips) {
            let (area, below) = rest.split_vertically(plot_h + strip);
            rest = below;
            if let Err(e) = draw_panel(&area, p, x_desc, bands, *strip) {
                tracing::warn!("chart {}: {e}", p.title);
            }
        }
        let _ = root.present();
    }
    svg
}

fn draw_panel(area: &Area<'_>, p: &Panel<'_>, x_desc: &str, bands: &[Band], strip: u32) -> Result<(), String> {
    let (plot, legend) = area.split_vertically(area.dim_in_pixel().1 - strip);
    let (x0, x1, y0, y1) = bounds(p.series);
    let mut chart = ChartBuilder::on(&plot)
        .caption(p.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|e| e.to_string())?;
    chart.configure_mesh().x_desc(x_desc).y_desc(p.y_desc).draw().map_err(|e| e.to_string())?;
    let shown: Vec<&Band> = bands.iter().filter(|b| b.to > x0 && b.from < x1).collect();
    for b in &shown {
        let shade = series_color(b.arm).mix(0.10);
        chart
            .draw_series(std::iter::once(Rectangle::new([(b.from.max(x0), y0), (b.to.min(x1), y1)], shade.filled())))
            .map_err(|e| e.to_string())?;
    }
    draw_lines(&mut chart, p.series, true)?;
    // Where a data x lands in the strip below (the strip starts at the panel's left edge).
    let left = legend.get_base_pixel().0;
    let at = |x: f64| chart.backend_coord(&(x, y0)).0 - left;
    let mut top = 4;
    if !bands.is_empty() {
        for b in &shown {
            let mid = at((b.from.max(x0) + b.to.min(x1)) / 2.0);
            let style = ("sans-serif", 11).into_font().color(&BLACK).pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Top,
            ));
            legend.draw(&Text::new(b.name.clone(), (mid, top), style)).map_err(|e| e.to_string())?;
        }
        top += 20;
    }
    draw_legend(&legend, p.series, top)
}

/// The legend: a short line in each series' colour and its name, in rows.
fn draw_legend(area: &Area<'_>, series: &[Series], top: i32) -> Result<(), String> {
    let (per_row, _) = legend_layout(series.len(), false);
    for (i, s) in series.iter().enumerate() {
        let x = LEGEND_LEFT + (i % per_row) as i32 * LEGEND_ENTRY;
        let y = top + (i / per_row) as i32 * 18;
        let color = series_color(i);
        area.draw(&PathElement::new(vec![(x, y + 7), (x + 22, y + 7)], color.stroke_width(3)))
            .map_err(|e| e.to_string())?;
        area.draw(&Text::new(s.name.clone(), (x + 28, y), ("sans-serif", 13).into_font().color(&BLACK)))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Okabe and Ito's palette, told apart by readers with any common colour
/// vision deficiency; yellow, weak on white, last.
const OKABE_ITO: [(u8, u8, u8); 8] = [
    (0, 114, 178),
    (213, 94, 0),
    (0, 158, 115),
    (230, 159, 0),
    (204, 121, 167),
    (86, 180, 233),
    (0, 0, 0),
    (240, 228, 66),
];

/// The colour of the `i`-th series.
pub fn series_color(i: usize) -> RGBAColor {
    let (r, g, b) = OKABE_ITO[i % OKABE_ITO.len()];
    RGBColor(r, g, b).to_rgba()
}

/// Draws each series. With `split_gaps`, a time series is split at its
/// gaps, so an arm idle while the other runs is not joined across the gap.
fn draw_lines<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    series: &[Series],
    split_gaps: bool,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, s) in series.iter().enumerate() {
        let color = series_color(i);
        let runs = if split_gaps { split_at_gaps(&s.points) } else { vec![s.points.clone()] };
        for run in runs {
            chart
                .draw_series(LineSeries::new(run.iter().copied(), color.stroke_width(2)))
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Splits a time series where a step is more than three times the median step.
pub fn split_at_gaps(points: &[(f64, f64)]) -> Vec<Vec<(f64, f64)>> {
    let mut steps: Vec<f64> = points.windows(2).map(|w| w[1].0 - w[0].0).collect();
    steps.sort_by(f64::total_cmp);
    let Some(median) = steps.get(steps.len() / 2).copied() else { return vec![points.to_vec()] };
    let mut runs = vec![Vec::new()];
    for (i, p) in points.iter().enumerate() {
        if i > 0 && p.0 - points[i - 1].0 > 3.0 * median {
            runs.push(Vec::new());
        }
        if let Some(run) = runs.last_mut() {
            run.push(*p);
        }
    }
    runs
}

/// A line chart over linear axes.
pub fn line_chart(title: &str, x_desc: &str, y_desc: &str, series: &[Series]) -> String {
    chart(&[Panel { title, y_desc, series }], x_desc, &[])
}

/// Two line charts stacked.
pub fn stacked_chart(top: (&str, &str, &[Series]), bottom: (&str, &str, &[Series]), x_desc: &str) -> String {
    let panels = [top, bottom].map(|(title, y_desc, series)| Panel { title, y_desc, series });
    chart(&panels, x_desc, &[])
}

/// The percentile curve of a µs histogram: x = 1/(1-q) ("1 in N"), y = ms.
pub fn percentile_points(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut pts: Vec<(f64, f64)> = h
        .iter_quantiles(5)
        .filter(|v| v.quantile_iterated_to() < 1.0)
        .map(|v| (1.0 / (1.0 - v.quantile_iterated_to()), v.value_iterated_to() as f64 / 1000.0))
        .collect();
    pts.push(((h.len() as f64).max(2.0), h.max() as f64 / 1000.0));
    pts
}

/// Latency by percentile, one curve per arm, on a log "1 in N" axis.
pub fn latency_chart(arms: &[(String, Histogram<u64>)]) -> String {
    let series: Vec<Series> =
        arms.iter().map(|(name, h)| Series { name: name.clone(), points: percentile_points(h) }).collect();
    let max_x = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).fold(10.0f64, f64::max);
    let (min_y, max_y) = y_range(&series);
    let mut svg = String::new();
    {
        let (_, strip) = legend_layout(series.len(), false);
        let root = SVGBackend::with_string(&mut svg, (SIZE.0, SIZE.1 + strip)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let (plot, legend) = root.split_vertically(SIZE.1);
        let result = (|| -> Result<(), String> {
            let mut chart = ChartBuilder::on(&plot)
                .caption("Latency by percentile (corrected)", ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(56)
                .build_cartesian_2d((1f64..max_x).log_scale(), min_y..max_y)
                .map_err(|e| e.to_string())?;
            chart
                .configure_mesh()
                .x_desc("percentile (log scale of 1 in N)")
                .y_desc(if min_y > 0.0 { format!("latency (ms), axis from {min_y:.2}") } else { "latency (ms)".into() })
                .x_label_formatter(&|x| {
                    // Only the decades are labelled: 1 in 10 → 90%, 1 in 1000 → 99.9%.
                    let decade = x.log10();
                    if (decade - decade.round()).abs() > 1e-6 {
                        return String::new();
                    }
                    let decimals = (decade.round() - 2.0).max(0.0) as usize;
                    format!("{:.decimals$}%", 100.0 * (1.0 - 1.0 / x))
                })
                .draw()
                .map_err(|e| e.to_string())?;
            draw_lines(&mut chart, &series, false)?;
            draw_legend(&legend, &series, 4)
        })();
        if let Err(e) = result {
            tracing::warn!("latency chart: {e}");
        }
        let _ = root.present();
    }
    svg
}

/// The corrected-latency histogram of all rounds of a run, at the precision
/// they were recorded with.
pub fn merged_corrected(run: &RunResult) -> Histogram<u64> {
    let mut rounds = run.rounds.iter().filter_map(|r| decode_histogram(r.histograms.get("corrected")?));
    let Some(mut merged) = rounds.next() else { return new_histogram() };
    for h in rounds {
        let _ = merged.add(&h);
    }
    merged
}

/// Every chart of a set of runs (one run, or the arms of a comparison), by file name.
pub fn all(runs: &[(String, &RunResult)]) -> Vec<(&'static str, String)> {
    let latency = latency_chart(&runs.iter().map(|(n, r)| (n.clone(), merged_corrected(r))).collect::<Vec<_>>());
    let mut rss = Vec::new();
    let mut cpu = Vec::new();
    let mut rate = Vec::new();
    let mut in_flight = Vec::new();
    let prefix = |name: &str| if runs.len() > 1 { format!("{name} ") } else { String::new() };
    for (name, run) in runs {
        for tier in [TierName::Caller, TierName::Downstream, TierName::Proxy] {
            let of_tier = run.samples.iter().filter(|s| s.tier == tier);
            if of_tier.clone().next().is_none() {
                continue;
            }
            rss.push(Series {
                name: format!("{}{tier}", prefix(name)),
                points: of_tier.clone().filter_map(|s| Some((s.t_seconds, s.rss_bytes? as f64 / 1048576.0))).collect(),
            });
            cpu.push(Series {
                name: format!("{}{tier}", prefix(name)),
                points: cpu_over(&of_tier.collect::<Vec<_>>(), 1.0),
            });
        }
        // The generator's figures, inside this arm's rounds only.
        let inside =
            |t: f64| run.rounds.iter().any(|r| t >= r.started_seconds && t <= r.started_seconds + r.window_seconds);
        let pts: Vec<_> = run.load_samples.windows(2).filter(|w| inside(w[1].t_seconds)).collect();
        rate.push(Series {
            name: format!("{}achieved rate", prefix(name)),
            points: pts.iter().map(|w| (w[1].t_seconds, w[1].ok_rate_since(&w[0]))).collect(),
        });
        in_flight.push(Series {
            name: format!("{}in flight", prefix(name)),
            points: pts.iter().map(|w| (w[1].t_seconds, w[1].in_flight as f64)).collect(),
        });
    }
    let harness =
        runs.first().map(|(_, run)| run.samples.iter().filter(|s| s.tier == TierName::Harness).collect::<Vec<_>>());
    if let Some(h) = harness {
        rss.push(Series {
            name: "harness".into(),
            points: h.iter().filter_map(|s| Some((s.t_seconds, s.rss_bytes? as f64 / 1048576.0))).collect(),
        });
        cpu.push(Series { name: "harness".into(), points: cpu_over(&h, 1.0) });
    }
    let bands = round_bands(runs);
    let time = |title, y_desc, series: &[Series]| chart(&[Panel { title, y_desc, series }], "time (s)", &bands);
    let rate_panels = [
        Panel { title: "Achieved rate (OK responses per second)", y_desc: "req/s", series: &rate },
        Panel { title: "Requests in flight", y_desc: "requests", series: &in_flight },
    ];
    vec![
        ("latency.svg", latency),
        ("rss.svg", time("Resident memory (RSS) over time", "MiB", &rss)),
        ("cpu.svg", time("CPU over time (CPU seconds per second, over 1 s)", "% of one core", &cpu)),
        ("rate.svg", chart(&rate_panels, "time (s)", &bands)),
    ]
}

/// Every measured round of every arm, named `gRPC r1` (`round 1` for one arm).
pub fn round_bands(runs: &[(String, &RunResult)]) -> Vec<Band> {
    let mut bands = Vec::new();
    for (arm, (name, run)) in runs.iter().enumerate() {
        for r in &run.rounds {
            let name = if runs.len() > 1 { format!("{name} r{}", r.index) } else { format!("round {}", r.index) };
            bands.push(Band { from: r.started_seconds, to: r.started_seconds + r.window_seconds, name, arm });
        }
    }
    bands
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{ResourceSample, TierName};

    #[test]
    fn latency_axes_are_scaled_to_the_data() {
        let s = [Series { name: "a".into(), points: vec![(1.0, 500.0), (100.0, 523.0)] }];
        let (lo, hi) = y_range(&s);
        assert!(lo > 495.0 && lo < 500.0 && hi > 523.0 && hi < 528.0, "{lo}..{hi}");
        let svg = latency_chart(&[("a".into(), {
            let mut h = new_histogram();
            h.record(500_000).unwrap();
            h.record(523_000).unwrap();
            h
        })]);
        assert!(svg.contains("axis from 49"), "the axis does not say where it starts");
        assert_eq!(y_range(&[]), (0.0, 1.0));
    }

    /// The y of every `<text>` element whose text is `what`.
    fn text_ys(svg: &str, what: &str) -> Vec<f64> {
        let mut ys = Vec::new();
        for (at, _) in svg.match_indices(&format!(">\n{what}\n</text>")) {
            let tag = &svg[svg[..at].rfind("<text").unwrap()..at];
            let y = tag.split(" y=\"").nth(1).unwrap();
            ys.push(y[..y.find('"').unwrap()].parse().unwrap());
        }
        ys
    }

    #[test]
    fn legends_sit_below_the_plot_and_rounds_are_named_by_arm() {
        let (mut g, mut r) = crate::testing::both(2, 1.0, 1.0);
        // Both arms' rounds run from 10 s to 70 s and from 70 s to 130 s.
        for run in [&mut g, &mut r] {
            run.samples = (0..40)
                .map(|i| ResourceSample {
                    t_seconds: f64::from(i) * 3.5,
                    tier: TierName::Caller,
                    cpu_percent: Some(10.0),
                    cpu_window_seconds: None,
                    rss_bytes: Some(20 << 20),
                    cpu_seconds: None,
                })
                .collect();
        }
        let charts = all(&[("gRPC".into(), &g), ("REST".into(), &r)]);
        let rss = &charts.iter().find(|(f, _)| *f == "rss.svg").unwrap().1;
        let axis = text_ys(rss, "time (s)")[0];
        for name in ["gRPC caller", "REST caller", "gRPC r1", "REST r2"] {
            let ys = text_ys(rss, name);
            assert!(!ys.is_empty() && ys.iter().all(|y| *y > axis), "{name} at {ys:?}, the plot ends at {axis}");
        }
        // A single run names its rounds alone.
        let one = all(&[("gRPC".into(), &g)]);
        assert_eq!(text_ys(&one[1].1, "round 2").len(), 1, "{}", one[1].1);
    }

    #[test]
    fn cpu_reads_over_a_second_from_cpu_seconds() {
        let at = |t: f64, cpu: f64| ResourceSample {
            t_seconds: t,
            tier: TierName::Caller,
            cpu_percent: Some(if ((t * 4.0) as u32).is_multiple_of(2) { 0.0 } else { 80.0 }),
            cpu_window_seconds: None,
            rss_bytes: None,
            cpu_seconds: Some(cpu),
        };
        // 0.1 CPU seconds every 0.25 s: 40% of a core, however the ticks fell.
        let samples: Vec<ResourceSample> = (0..9).map(|i| at(f64::from(i) * 0.25, f64::from(i) * 0.1)).collect();
        let refs: Vec<&ResourceSample> = samples.iter().collect();
        let points = cpu_over(&refs, 1.0);
        assert_eq!(points.len(), 5);
        assert!(points.iter().all(|p| (p.1 - 40.0).abs() < 1e-9), "{points:?}");
    }

    #[test]
    fn gaps_split_a_series() {
        let pts = [(0.0, 1.0), (0.25, 1.0), (0.5, 1.0), (5.0, 2.0), (5.25, 2.0)];
        let runs = split_at_gaps(&pts);
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[1], vec![(5.0, 2.0), (5.25, 2.0)]);
        assert_eq!(split_at_gaps(&[(1.0, 1.0)]).len(), 1);
    }
}
