//! Every key of the UI, declared once: [`App::on_key`](crate::App::on_key) maps keys to
//! commands from [`KEYS`], the help overlay lists it, and `docs/reference/keys.md` is
//! generated from it (a test fails when that file is stale).

use std::fmt::Write as _;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What a key asks for; [`App::on_key`](crate::App::on_key) does it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    PrevInterface,
    NextInterface,
    Fold,
    NextPane,
    PrevPane,
    /// Straight to the findings pane.
    Findings,
    Filter,
    Sort,
    Pause,
    Slower,
    Faster,
    Help,
    Quit,
    /// Replaying a recording: a second back / forward.
    SecondBack,
    SecondForward,
    /// Replaying: a minute back / forward.
    MinuteBack,
    MinuteForward,
    /// Replaying: to the previous / next moment that stood out (`tcmon replay`'s intervals).
    PrevEvent,
    NextEvent,
    /// With a filter kept: clear it (the tree shows whole again).
    ClearFilter,
    /// While typing a filter: keep it and stop typing.
    FilterKeep,
    /// While typing a filter: clear it and stop typing.
    FilterClear,
    /// While typing a filter: erase its last character.
    FilterErase,
    /// While typing a filter: add the character typed.
    FilterType,
    /// While the help is open: close it, and do nothing else.
    CloseHelp,
}

/// A key as the table names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// This key, whatever modifiers are held (Shift-g arrives as `G` with Shift).
    Code(KeyCode),
    /// Control and this character.
    Ctrl(char),
    /// Any character key.
    AnyChar,
    /// Any key at all.
    Any,
}

impl Key {
    fn matches(self, k: &KeyEvent) -> bool {
        match self {
            Key::Code(c) => k.code == c,
            Key::Ctrl(c) => {
                k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char(c)
            }
            Key::AnyChar => matches!(k.code, KeyCode::Char(_)),
            Key::Any => true,
        }
    }

    /// How the help and the docs write the key.
    pub fn name(self) -> String {
        match self {
            Key::Code(c) => match c {
                KeyCode::Up => "↑".into(),
                KeyCode::Down => "↓".into(),
                KeyCode::Left => "←".into(),
                KeyCode::Right => "→".into(),
                KeyCode::PageUp => "PgUp".into(),
                KeyCode::PageDown => "PgDn".into(),
                KeyCode::Char(' ') => "Space".into(),
                KeyCode::Char(c) => c.to_string(),
                KeyCode::Home => "Home".into(),
                KeyCode::End => "End".into(),
                KeyCode::Enter => "Enter".into(),
                KeyCode::Tab => "Tab".into(),
                KeyCode::BackTab => "Shift-Tab".into(),
                KeyCode::Backspace => "Backspace".into(),
                KeyCode::Esc => "Esc".into(),
                // crossterm's own names (not the keys above, which it names per platform)
                other => other.to_string(),
            },
            Key::Ctrl(c) => format!("Ctrl-{}", c.to_ascii_uppercase()),
            Key::AnyChar => "any character".into(),
            Key::Any => "any key".into(),
        }
    }
}

/// Where a key works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// The tree and the panes (what the help overlay lists).
    Main,
    /// The tree and the panes with a filter kept (after `/` and Enter): these keys first,
    /// then [`Context::Main`]'s.
    Filtered,
    /// While a filter is typed (after `/`).
    Filter,
    /// While the help overlay is open.
    Help,
    /// Replaying a recording (`tcmon --replay`): these keys where the tree's and the kept
    /// filter's have none.
    Replay,
}

impl Context {
    const ALL: [Context; 5] = [
        Context::Main,
        Context::Filtered,
        Context::Filter,
        Context::Help,
        Context::Replay,
    ];

    /// Where keys not bound here are looked up next.
    fn fallback(self) -> Option<Context> {
        match self {
            Context::Filtered => Some(Context::Main),
            Context::Main | Context::Filter | Context::Help | Context::Replay => None,
        }
    }

    fn title(self) -> &'static str {
        match self {
            Context::Main => "In the tree and the panes",
            Context::Filtered => {
                "With a filter kept (after `/` and Enter; the other keys as in the tree)"
            }
            Context::Filter => {
                "While typing a filter (after `/`; keys held with Alt or Ctrl do nothing)"
            }
            Context::Help => "While the help is open (after `?`)",
            Context::Replay => {
                "Replaying a recording (`tcmon --replay DIR`; the other keys as in the tree)"
            }
        }
    }
}

/// A key and what it asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding {
    pub key: Key,
    pub command: Command,
    /// Also in every other context, and while the first poll is read (Ctrl-C).
    pub everywhere: bool,
}

const fn on(key: KeyCode, command: Command) -> Binding {
    Binding {
        key: Key::Code(key),
        command,
        everywhere: false,
    }
}

const fn ch(c: char, command: Command) -> Binding {
    on(KeyCode::Char(c), command)
}

/// One line of the help: its keys, in groups the help separates by two spaces.
#[derive(Debug)]
pub struct Entry {
    pub context: Context,
    pub keys: &'static [&'static [Binding]],
    /// Aliases the overlay does not list (the docs do).
    pub also: &'static [Binding],
    pub help: &'static str,
    /// In the footer, at this place (most needed first), in these words; the footer keeps
    /// whole hints that fit.
    pub footer: Option<(u8, &'static str)>,
}

impl Entry {
    /// The keys as the help overlay writes them: `↑ ↓  j k`.
    pub fn label(&self) -> String {
        self.keys
            .iter()
            .map(|g| g.iter().map(|b| b.key.name()).collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join("  ")
    }

    fn bindings(&self) -> impl Iterator<Item = &Binding> {
        self.keys.iter().flat_map(|g| g.iter()).chain(self.also)
    }
}

use Command as C;

/// The keys, in the order the help lists them. Within a context the first binding that
/// matches a key wins.
pub const KEYS: &[Entry] = &[
    Entry {
        context: Context::Main,
        keys: &[
            &[on(KeyCode::Up, C::Up), on(KeyCode::Down, C::Down)],
            &[ch('j', C::Down), ch('k', C::Up)],
        ],
        also: &[],
        help: "move (or scroll the focused pane)",
        footer: Some((2, "↑↓ move")),
    },
    Entry {
        context: Context::Main,
        keys: &[&[
            on(KeyCode::PageUp, C::PageUp),
            on(KeyCode::PageDown, C::PageDown),
            on(KeyCode::Home, C::Top),
            on(KeyCode::End, C::Bottom),
        ]],
        also: &[ch('g', C::Top), ch('G', C::Bottom)],
        help: "move by a page, to the ends",
        footer: None,
    },
    Entry {
        context: Context::Main,
        keys: &[
            &[
                on(KeyCode::Left, C::PrevInterface),
                on(KeyCode::Right, C::NextInterface),
            ],
            &[ch('h', C::PrevInterface), ch('l', C::NextInterface)],
        ],
        also: &[],
        help: "previous / next interface",
        footer: Some((6, "←→ interface")),
    },
    Entry {
        context: Context::Main,
        keys: &[&[on(KeyCode::Enter, C::Fold)], &[ch(' ', C::Fold)]],
        also: &[],
        help: "fold / unfold the selected subtree",
        footer: Some((3, "Enter fold")),
    },
    Entry {
        context: Context::Main,
        keys: &[
            &[on(KeyCode::Tab, C::NextPane)],
            &[on(KeyCode::BackTab, C::PrevPane)],
            &[ch('f', C::Findings)],
        ],
        also: &[],
        help: "next / previous pane, straight to the findings",
        footer: Some((4, "Tab pane")),
    },
    Entry {
        context: Context::Main,
        keys: &[&[ch('/', C::Filter)]],
        also: &[],
        help: "filter by handle or kind (Enter keeps, Esc clears)",
        footer: Some((5, "/ filter")),
    },
    Entry {
        context: Context::Main,
        keys: &[&[ch('s', C::Sort)]],
        also: &[],
        help: "sort siblings: tree, rate, drops/s, backlog",
        footer: Some((7, "s sort")),
    },
    Entry {
        context: Context::Main,
        keys: &[&[ch('p', C::Pause)]],
        also: &[],
        help: "pause / resume polling",
        footer: Some((8, "p pause")),
    },
    Entry {
        context: Context::Main,
        keys: &[&[ch('+', C::Slower)], &[ch('-', C::Faster)]],
        also: &[ch('=', C::Slower)],
        help: "poll less / more often",
        footer: Some((9, "+/- interval")),
    },
    Entry {
        context: Context::Replay,
        keys: &[
            &[ch('[', C::SecondBack), ch(']', C::SecondForward)],
            &[ch('{', C::MinuteBack), ch('}', C::MinuteForward)],
        ],
        also: &[],
        help: "a second / a minute back, forward",
        footer: None,
    },
    Entry {
        context: Context::Replay,
        keys: &[&[ch('N', C::PrevEvent), ch('n', C::NextEvent)]],
        also: &[],
        help: "previous / next moment a queue stood out (backlog, drops, delay)",
        footer: None,
    },
    Entry {
        context: Context::Main,
        keys: &[&[ch('?', C::Help)]],
        also: &[],
        help: "this help: any key closes it (q and Esc too)",
        footer: Some((0, "? help")),
    },
    Entry {
        context: Context::Main,
        keys: &[
            &[ch('q', C::Quit)],
            &[on(KeyCode::Esc, C::Quit)],
            &[Binding {
                key: Key::Ctrl('c'),
                command: C::Quit,
                everywhere: true,
            }],
        ],
        also: &[],
        help: "quit (while this help is open, Ctrl-C only)",
        footer: Some((1, "q quit")),
    },
    Entry {
        context: Context::Filtered,
        keys: &[&[on(KeyCode::Esc, C::ClearFilter)]],
        also: &[],
        help: "clear the filter (then Esc quits)",
        footer: None,
    },
    Entry {
        context: Context::Filter,
        keys: &[&[on(KeyCode::Enter, C::FilterKeep)]],
        also: &[],
        help: "keep the filter and stop typing",
        footer: None,
    },
    Entry {
        context: Context::Filter,
        keys: &[&[on(KeyCode::Esc, C::FilterClear)]],
        also: &[],
        help: "clear the filter and stop typing",
        footer: None,
    },
    Entry {
        context: Context::Filter,
        keys: &[&[on(KeyCode::Backspace, C::FilterErase)]],
        also: &[],
        help: "erase the last character",
        footer: None,
    },
    Entry {
        context: Context::Filter,
        keys: &[&[Binding {
            key: Key::AnyChar,
            command: C::FilterType,
            everywhere: false,
        }]],
        also: &[],
        help: "add it to the filter (`q` too: it is text here)",
        footer: None,
    },
    Entry {
        context: Context::Help,
        keys: &[&[Binding {
            key: Key::Any,
            command: C::CloseHelp,
            everywhere: false,
        }]],
        also: &[],
        help: "close the help and do nothing else (q and Esc too)",
        footer: None,
    },
];

/// The binding of `k` in `context`: one that works everywhere first, then the context's, then
/// those of the context it falls back to.
pub fn binding(context: Context, k: &KeyEvent) -> Option<&'static Binding> {
    let everywhere = KEYS
        .iter()
        .flat_map(Entry::bindings)
        .find(|b| b.everywhere && b.key.matches(k));
    let within = |c: Context| {
        KEYS.iter()
            .filter(move |e| e.context == c)
            .flat_map(Entry::bindings)
            .find(|b| b.key.matches(k))
    };
    everywhere
        .or_else(|| within(context))
        .or_else(|| context.fallback().and_then(within))
}

/// The key that asks for `command` in `context` (the first the table lists), as the help
/// writes it: for views that name the key, so that the table stays the one place saying it.
pub fn key_for(context: Context, command: Command) -> Option<String> {
    KEYS.iter()
        .filter(|e| e.context == context)
        .flat_map(Entry::bindings)
        .find(|b| b.command == command)
        .map(|b| b.key.name())
}

/// What `k` asks for in `context`.
pub fn command(context: Context, k: &KeyEvent) -> Option<Command> {
    binding(context, k).map(|b| b.command)
}

/// The help overlay's lines: the main context's keys and what they do, and the replay's
/// while `replaying`.
pub fn overlay(replaying: bool) -> impl Iterator<Item = (String, &'static str)> {
    KEYS.iter()
        .filter(move |e| e.context == Context::Main || (replaying && e.context == Context::Replay))
        .map(|e| (e.label(), e.help))
}

/// The footer's hints, most needed first.
pub fn footer() -> Vec<&'static str> {
    let mut hints: Vec<(u8, &str)> = KEYS.iter().filter_map(|e| e.footer).collect();
    hints.sort_unstable();
    hints.into_iter().map(|(_, h)| h).collect()
}

/// `docs/reference/keys.md`.
pub fn reference() -> String {
    let mut out = String::from(
        "<!-- Generated from crates/tcmon-tui/src/keys.rs by \
         `UPDATE_EXPECT=1 cargo test -p tcmon-tui --lib keys`: do not edit. -->\n\
         # Keys of the terminal UI\n\n\
         `tcmon` without a subcommand opens the terminal UI; `?` shows these keys in it. \
         Letters are case-sensitive.",
    );
    let quit: Vec<String> = KEYS
        .iter()
        .filter(|e| e.context == Context::Main)
        .flat_map(Entry::bindings)
        .filter(|b| b.command == Command::Quit)
        .map(|b| format!("`{}`", b.key.name()))
        .collect();
    let _ = writeln!(
        out,
        " While the first poll is read, only the quit keys ({}) do something.",
        quit.join(", ")
    );
    for context in Context::ALL {
        let _ = write!(
            out,
            "\n## {}\n\n| keys | does |\n|---|---|\n",
            context.title()
        );
        for e in KEYS.iter().filter(|e| e.context == context) {
            let keys: Vec<String> = e
                .bindings()
                .map(|b| {
                    let name = match b.key {
                        Key::Code(_) | Key::Ctrl(_) => format!("`{}`", b.key.name()),
                        Key::AnyChar | Key::Any => b.key.name(),
                    };
                    if b.everywhere {
                        format!("{name} (everywhere)")
                    } else {
                        name
                    }
                })
                .collect();
            let _ = writeln!(out, "| {} | {} |", keys.join(" "), e.help);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_reference_is_current() {
        expect_test::expect_file!["../../../docs/reference/keys.md"].assert_eq(&reference());
    }

    #[test]
    fn footer_places_are_distinct() {
        let mut places: Vec<u8> = KEYS.iter().filter_map(|e| e.footer.map(|f| f.0)).collect();
        let n = places.len();
        places.sort_unstable();
        places.dedup();
        assert_eq!(places.len(), n);
    }

    #[test]
    fn no_key_is_bound_twice_in_a_context() {
        for context in Context::ALL {
            let keys: Vec<Key> = KEYS
                .iter()
                .filter(|e| e.context == context)
                .flat_map(Entry::bindings)
                .map(|b| b.key)
                .collect();
            for (i, k) in keys.iter().enumerate() {
                assert!(!keys[..i].contains(k), "{k:?} twice in {context:?}");
            }
        }
    }
}
