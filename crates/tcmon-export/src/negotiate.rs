//! Which format a scraper gets, from its `Accept` header.

/// The two exposition formats of `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// OpenMetrics 1.0.0.
    OpenMetrics,
    /// The Prometheus text format 0.0.4: what everything that does not ask for OpenMetrics gets.
    Prometheus,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// OpenMetrics when the `Accept` header prefers it (highest q, ties going to OpenMetrics)
    /// over the 0.0.4 text, for version 1.0.0 or no version; 0.0.4 otherwise. Prometheus sends
    /// e.g. `application/openmetrics-text;version=1.0.0,application/openmetrics-text;
    /// version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1`.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Prometheus;
        };
        let mut best_om = 0.0_f64;
        let mut best_text = 0.0_f64;
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let mut q = 1.0_f64;
            let mut version = None;
            for p in parts {
                let Some((k, v)) = p.split_once('=') else {
                    continue;
                };
                let v = v.trim().trim_matches('"');
                match k.trim().to_ascii_lowercase().as_str() {
                    "q" => q = v.parse().unwrap_or(0.0),
                    "version" => version = Some(v.to_owned()),
                    _ => {}
                }
            }
            match media.as_str() {
                "application/openmetrics-text"
                    if version.as_deref().is_none_or(|v| v == "1.0.0") =>
                {
                    best_om = best_om.max(q);
                }
                "text/plain" if version.as_deref().is_none_or(|v| v == "0.0.4") => {
                    best_text = best_text.max(q);
                }
                "*/*" | "text/*" => best_text = best_text.max(q),
                _ => {}
            }
        }
        if best_om > 0.0 && best_om >= best_text {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Format::{self, OpenMetrics, Prometheus};

    #[test]
    fn scrapers_get_what_they_prefer() {
        for (accept, want) in [
            (None, Prometheus),
            (Some("*/*"), Prometheus),
            (Some("text/plain"), Prometheus),
            (Some("application/openmetrics-text"), OpenMetrics),
            (Some("application/openmetrics-text; version=1.0.0"), OpenMetrics),
            // Prometheus 2.x
            (
                Some("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
                OpenMetrics,
            ),
            // Prometheus 3.x with OpenMetrics turned off for the job
            (
                Some("text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,*/*;q=0.1"),
                Prometheus,
            ),
            // only an OpenMetrics version we do not write
            (Some("application/openmetrics-text;version=0.0.1"), Prometheus),
            (Some("application/openmetrics-text;q=0"), Prometheus),
            (Some("application/json"), Prometheus),
        ] {
            assert_eq!(Format::negotiate(accept), want, "{accept:?}");
        }
    }
}
