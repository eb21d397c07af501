//! Progress reporting for long stages: an indicatif spinner on a terminal, nothing when
//! stderr is not a terminal (CI logs, pipes), and always a one-line summary with the
//! stage's wall time.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A running stage.
pub struct Stage {
    name: String,
    bar: ProgressBar,
    started: Instant,
}

impl Stage {
    /// Starts a stage with a spinner (hidden when stderr is not a terminal).
    pub fn start(name: &str) -> Stage {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} [{elapsed}]") {
            bar.set_style(style);
        }
        bar.set_message(name.to_owned());
        bar.enable_steady_tick(Duration::from_millis(120));
        Stage {
            name: name.to_owned(),
            bar,
            started: Instant::now(),
        }
    }

    /// Prints a line to stderr without garbling the spinner (above it on a terminal).
    pub fn println(&self, line: &str) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    /// Replaces the spinner's message.
    pub fn set_message(&self, message: String) {
        self.bar.set_message(message);
    }

    /// A hook that shows the rows a log reader has read on the spinner (or, without a
    /// terminal, as a line every [`querylog::ROWS_PER_REPORT`] rows).
    pub fn rows_hook(&self) -> querylog::RowsHook {
        let (bar, name) = (self.bar.clone(), self.name.clone());
        querylog::RowsHook::new(move |rows| {
            let text = format!("{name}: {rows} rows read");
            if bar.is_hidden() {
                eprintln!("{text}");
            } else {
                bar.set_message(text);
            }
        })
    }

    /// Seconds since the stage started.
    pub fn seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Ends the stage and prints `name: summary (N.Ns)` to stderr.
    pub fn finish(self, summary: &str) {
        self.bar.finish_and_clear();
        eprintln!("{}: {} ({:.1}s)", self.name, summary, self.seconds());
    }
}
