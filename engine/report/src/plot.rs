//! The one line-plot routine of every report: `quench recv`'s rate and latency plots and
//! `quench sim`'s rate and queue plots.
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

/// A named line for a plot.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Series {
    pub name: String,
    /// (x, y) points.
    pub points: Vec<(f64, f64)>,
}

/// A series thinned as its points arrive in x order, so a plot of a long run holds a bounded
/// number of points: the x range is cut into `buckets` equal spans, and of the points in a span
/// only the lowest and the highest are kept (in x order), which keeps the envelope a line plot
/// shows. A span with one or two points keeps them all, so a short series is unchanged.
#[derive(Clone, Debug)]
pub struct Thin {
    x0: f64,
    width: f64,
    bucket: Option<u64>,
    /// The current span's lowest and highest points.
    low: (f64, f64),
    high: (f64, f64),
    count: u32,
    points: Vec<(f64, f64)>,
}

impl Thin {
    /// A series over `x0..=x1` kept to at most 2 x `buckets` points.
    pub fn new(x0: f64, x1: f64, buckets: u32) -> Thin {
        let span = (x1 - x0).max(0.0);
        Thin {
            x0,
            width: if span > 0.0 {
                span / f64::from(buckets.max(1))
            } else {
                f64::INFINITY
            },
            bucket: None,
            low: (0.0, 0.0),
            high: (0.0, 0.0),
            count: 0,
            points: Vec::new(),
        }
    }

    fn close(&mut self) {
        match self.count {
            0 => {}
            1 => self.points.push(self.low),
            _ => {
                let (a, b) = if self.low.0 <= self.high.0 {
                    (self.low, self.high)
                } else {
                    (self.high, self.low)
                };
                self.points.push(a);
                self.points.push(b);
            }
        }
        self.count = 0;
    }

    /// Adds the point `(x, y)`; `x` does not decrease from one call to the next.
    pub fn push(&mut self, x: f64, y: f64) {
        let b = if self.width.is_finite() {
            ((x - self.x0).max(0.0) / self.width) as u64
        } else {
            0
        };
        if self.bucket != Some(b) {
            self.close();
            self.bucket = Some(b);
        }
        if self.count == 0 {
            self.low = (x, y);
            self.high = (x, y);
        } else if self.count == 1 {
            // Two points: both kept, in order.
            if y < self.low.1 {
                self.low = (x, y);
            } else {
                self.high = (x, y);
            }
        } else {
            if y < self.low.1 {
                self.low = (x, y);
            }
            if y > self.high.1 {
                self.high = (x, y);
            }
        }
        self.count += 1;
    }

    /// The kept points, in x order.
    pub fn finish(mut self) -> Vec<(f64, f64)> {
        self.close();
        self.points
    }
}

/// Drawing a plot failed (plotters reports the backend's error as text).
#[derive(Debug, thiserror::Error)]
#[error("drawing the plot {title:?}: {why}")]
pub struct PlotError {
    pub title: String,
    pub why: String,
}

/// What a plot says around its lines.
#[derive(Clone, Copy, Debug, Default)]
pub struct Plot<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// A line under the title saying which series are drawn of how many there are ("12 of 137
    /// flows shown: the 12 with the most octets").
    pub note: Option<&'a str>,
    /// A logarithmic x axis (flow sizes), over the positive x values.
    pub log_x: bool,
}

/// `series` as lines in an SVG document of 900 x 500 pixels (see [`Plot::draw`]).
pub fn line_plot(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<String, PlotError> {
    Plot {
        title,
        x_label,
        y_label,
        ..Plot::default()
    }
    .draw(series)
}

impl Plot<'_> {
    /// `series` as lines in an SVG document of 900 x 500 pixels: the x axis spans the points'
    /// x values (from the first event, not from 0), the y axis starts at 0 and reaches 5 %
    /// above the largest y (at least 1e-9, so an empty or all-zero plot still has axes); one
    /// colour per series, a legend when there is a series, room on the right for the last
    /// x label.
    ///
    /// The output depends on the inputs only (no time, no randomness): `quench sim`'s plots
    /// are part of its byte-identical outputs.
    pub fn draw(&self, series: &[Series]) -> Result<String, PlotError> {
        let err = |e: &dyn std::fmt::Display| PlotError {
            title: self.title.to_string(),
            why: e.to_string(),
        };
        let points = || {
            series
                .iter()
                .flat_map(|s| s.points.iter())
                .filter(|p| !self.log_x || p.0 > 0.0)
        };
        let x_min = points().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let x_max = points().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
        let (x_min, x_max) = match (x_min.is_finite(), self.log_x) {
            (false, false) => (0.0, 1.0),
            (false, true) => (1.0, 10.0),
            (true, _) if x_max > x_min => (x_min, x_max),
            (true, false) => (x_min, x_min + 1.0),
            (true, true) => (x_min / 2.0, x_min * 2.0),
        };
        let y_max = points().map(|p| p.1).fold(1e-9, f64::max) * 1.05;
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (900, 500)).into_drawing_area();
            root.fill(&WHITE).map_err(|e| err(&e))?;
            let mut area = root
                .titled(self.title, ("sans-serif", 20))
                .map_err(|e| err(&e))?;
            if let Some(note) = self.note {
                area.draw(&Text::new(note, (80, 2), ("sans-serif", 14)))
                    .map_err(|e| err(&e))?;
                area = area.margin(18, 0, 0, 0);
            }
            // The same chart on a linear or a logarithmic x axis (two coordinate types).
            macro_rules! chart {
                ($x:expr) => {{
                    let mut chart = ChartBuilder::on(&area)
                        .margin(10)
                        .margin_right(40)
                        .x_label_area_size(40)
                        .y_label_area_size(70)
                        .build_cartesian_2d($x, 0.0..y_max)
                        .map_err(|e| err(&e))?;
                    chart
                        .configure_mesh()
                        .x_desc(self.x_label)
                        .y_desc(self.y_label)
                        .draw()
                        .map_err(|e| err(&e))?;
                    for (i, s) in series.iter().enumerate() {
                        let color = Palette99::pick(i).to_rgba();
                        let pts = s
                            .points
                            .iter()
                            .copied()
                            .filter(|p| !self.log_x || p.0 > 0.0);
                        chart
                            .draw_series(LineSeries::new(pts, color))
                            .map_err(|e| err(&e))?
                            .label(s.name.clone())
                            .legend(move |(x, y)| {
                                PathElement::new(vec![(x, y), (x + 16, y)], color)
                            });
                    }
                    if !series.is_empty() {
                        chart
                            .configure_series_labels()
                            .background_style(WHITE.mix(0.8))
                            .border_style(BLACK)
                            .draw()
                            .map_err(|e| err(&e))?;
                    }
                }};
            }
            if self.log_x {
                chart!((x_min..x_max).log_scale());
            } else {
                chart!(x_min..x_max);
            }
            root.present().map_err(|e| err(&e))?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The x axis's tick labels: (centre x in pixels, value).
    fn x_ticks(svg: &str) -> Vec<(f64, f64)> {
        svg.split("<text ")
            .skip(1)
            .filter(|t| t.contains("text-anchor=\"middle\""))
            .filter_map(|t| {
                let x = t.split("x=\"").nth(1)?.split('"').next()?.parse().ok()?;
                let body = t.split('>').nth(1)?.split('<').next()?.trim();
                Some((x, body.parse().ok()?))
            })
            .collect()
    }

    #[test]
    fn the_x_axis_spans_the_data_and_its_last_label_fits() {
        // Flows that start at 2 s (HPCC's flow files): the axis starts there, not at 0.
        let s = vec![Series {
            name: "flow 0".into(),
            points: vec![(2000.0, 1.0), (2003.5, 2.0), (2012.0, 0.5)],
        }];
        let plot = Plot {
            title: "t",
            x_label: "time (ms)",
            y_label: "rate",
            note: Some("1 of 3 flows shown: the 1 with the most octets"),
            log_x: false,
        };
        let svg = plot.draw(&s).unwrap();
        let ticks = x_ticks(&svg);
        assert!(ticks.len() >= 3, "{ticks:?}");
        assert!(
            ticks.iter().all(|&(_, v)| (2000.0..=2012.0).contains(&v)),
            "{ticks:?}"
        );
        // The rightmost label's half width (at most 7 characters of the 9.7 px font) stays
        // inside the 900 pixels.
        let right = ticks.iter().map(|t| t.0).fold(0.0, f64::max);
        assert!(right + 7.0 * 9.7 * 0.6 / 2.0 < 900.0, "{right}");
        assert!(svg.contains("1 of 3 flows shown: the 1 with the most octets"));
        // A logarithmic axis over sizes.
        let sizes = vec![Series {
            name: "p99".into(),
            points: vec![(1000.0, 3.0), (100_000.0, 2.0), (10_000_000.0, 1.5)],
        }];
        let svg = Plot {
            log_x: true,
            ..plot
        }
        .draw(&sizes)
        .unwrap();
        let ticks = x_ticks(&svg);
        assert!(
            ticks.iter().any(|t| t.1 == 10_000.0) && ticks.iter().any(|t| t.1 == 1e6),
            "{ticks:?}"
        );
    }

    #[test]
    fn draws_every_series_with_its_legend_and_repeats_itself() {
        let s = vec![
            Series {
                name: "flow 1".into(),
                points: vec![(0.0, 1.0), (1.0, 2.0)],
            },
            Series {
                name: "flow 2".into(),
                points: vec![(0.5, 3.0)],
            },
        ];
        let svg = line_plot("t", "time (s)", "rate", &s).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
        assert!(svg.contains("flow 1") && svg.contains("flow 2") && svg.contains("time (s)"));
        assert_eq!(line_plot("t", "time (s)", "rate", &s).unwrap(), svg);
        // Thinning keeps a short series whole and a long one's envelope.
        let mut t = Thin::new(0.0, 10.0, 5);
        for (x, y) in [(0.0, 1.0), (3.0, 2.0), (9.0, 0.5)] {
            t.push(x, y);
        }
        assert_eq!(t.finish(), [(0.0, 1.0), (3.0, 2.0), (9.0, 0.5)]);
        let mut t = Thin::new(0.0, 1000.0, 10);
        for i in 0..=1000 {
            t.push(f64::from(i), if i == 555 { 9.0 } else { f64::from(i % 7) });
        }
        let pts = t.finish();
        assert!(pts.len() <= 22, "{}", pts.len());
        assert!(pts.contains(&(555.0, 9.0)), "the peak survives");
        assert!(pts.windows(2).all(|w| w[0].0 <= w[1].0));
        // No series: axes, no legend, no error.
        let empty = line_plot("t", "x", "y", &[]).unwrap();
        assert!(empty.starts_with("<svg") && !empty.contains("flow"));
    }
}
