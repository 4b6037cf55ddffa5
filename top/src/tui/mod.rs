//! The interactive view (a terminal on stdout): the GPU table with each
//! GPU's MIG instances and holders, or the workload table; keys sort,
//! filter, switch views and quit. Reads run on their own thread, so a slow
//! or dead source never freezes the keys.

mod draw;
mod workloads;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::model::{self, Filter, Snapshot};
use crate::source::Source;

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum View {
    Gpus,
    Workloads,
}

/// Sort keys of each view, in the order `s` cycles through them.
pub const GPU_SORTS: &[&str] = &["gpu", "util", "vram", "power", "temp"];
pub const WORKLOAD_SORTS: &[&str] = &["name", "devices", "activity", "cost", "cost/mtok"];

/// What the screen shows.
pub struct State {
    pub source: String,
    pub view: View,
    pub sort: usize,
    pub filter: String,
    pub editing: bool,
    pub help: bool,
    pub color: bool,
    pub snap: Option<Snapshot>,
    /// The last read's failure, shown until a read succeeds.
    pub error: Option<String>,
    pub updated: Option<Instant>,
}

impl State {
    /// `st`, or no style at all with `NO_COLOR`.
    pub fn style(&self, st: ratatui::style::Style) -> ratatui::style::Style {
        if self.color {
            st
        } else {
            ratatui::style::Style::default()
        }
    }

    pub fn sort_key(&self) -> &'static str {
        let keys = match self.view {
            View::Gpus => GPU_SORTS,
            View::Workloads => WORKLOAD_SORTS,
        };
        keys[self.sort % keys.len()]
    }

    /// Applies a key; false when it quits.
    fn key(&mut self, k: KeyEvent) -> bool {
        if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
            return false;
        }
        if self.editing {
            match k.code {
                KeyCode::Enter => self.editing = false,
                KeyCode::Esc => {
                    self.editing = false;
                    self.filter.clear();
                }
                KeyCode::Backspace => {
                    self.filter.pop();
                }
                KeyCode::Char(c) => self.filter.push(c),
                _ => {}
            }
            return true;
        }
        match k.code {
            KeyCode::Char('q') => return false,
            KeyCode::Esc if !self.help => return false,
            KeyCode::Tab => {
                self.view = match self.view {
                    View::Gpus => View::Workloads,
                    View::Workloads => View::Gpus,
                };
                self.sort = 0;
            }
            KeyCode::Char('s') => self.sort += 1,
            KeyCode::Char('/') => self.editing = true,
            KeyCode::Char('?') => self.help = !self.help,
            KeyCode::Esc => self.help = false,
            _ => {}
        }
        true
    }
}

/// Runs the view until `q`.
pub fn run(src: Source, filter: Filter, interval: Duration) -> std::io::Result<()> {
    let (tx, rx) = mpsc::channel();
    let name = src.name();
    std::thread::spawn(move || {
        loop {
            let read = src
                .fetch()
                .map(|s| model::build(&src.name(), &src.families(), &s, &filter))
                .map_err(|e| e.to_string());
            if tx.send(read).is_err() {
                return;
            }
            std::thread::sleep(interval);
        }
    });
    let mut state = State {
        source: name,
        view: View::Gpus,
        sort: 0,
        filter: String::new(),
        editing: false,
        help: false,
        color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        snap: None,
        error: None,
        updated: None,
    };
    let mut term = ratatui::try_init()?;
    let result = events(&mut term, &mut state, &rx);
    ratatui::restore();
    result
}

fn events(
    term: &mut ratatui::DefaultTerminal,
    state: &mut State,
    rx: &mpsc::Receiver<Result<Snapshot, String>>,
) -> std::io::Result<()> {
    loop {
        while let Ok(read) = rx.try_recv() {
            match read {
                Ok(snap) => {
                    state.snap = Some(snap);
                    state.error = None;
                    state.updated = Some(Instant::now());
                }
                Err(e) => state.error = Some(e),
            }
        }
        term.draw(|f| draw::frame(f, state))?;
        if event::poll(Duration::from_millis(100))?
            && let Event::Key(k) = event::read()?
            && k.kind == KeyEventKind::Press
            && !state.key(k)
        {
            return Ok(());
        }
    }
}
