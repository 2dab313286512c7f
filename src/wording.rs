//! Messages that name settings, arguments or calls: each name kept apart from the text, so
//! that each surface says it in its own words (the library its keywords, the command line its
//! options) without rewriting the text.

use std::fmt;

/// A message: text, and the names of what it is about, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wording(Vec<Part>);

/// One piece of [`Wording`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Text, as it is.
    Text(String),
    /// A setting, argument or call the message names.
    Name {
        /// Its Python name (`client_id`, `daily_requests`, `sync_events`), by which another
        /// surface finds its own word for it.
        key: String,
        /// How the library writes it, backticks included (`` `client_id=` ``).
        said: String,
    },
}

impl Wording {
    /// An empty message, to be built with [`Wording::text`], [`Wording::arg`] and the like.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Text added as it is.
    #[must_use]
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.0.push(Part::Text(text.into()));
        self
    }

    /// The argument or setting `key`, as the library names it: `` `key` ``.
    #[must_use]
    pub fn arg(self, key: &str) -> Self {
        self.name(key, format!("`{key}`"))
    }

    /// The keyword `key` one passes: `` `key=` ``.
    #[must_use]
    pub fn keyword(self, key: &str) -> Self {
        self.name(key, format!("`{key}=`"))
    }

    /// `key`, which the library writes as `said`.
    #[must_use]
    pub fn name(mut self, key: &str, said: impl Into<String>) -> Self {
        self.0.push(Part::Name {
            key: key.to_owned(),
            said: said.into(),
        });
        self
    }

    /// The pieces, in order.
    pub fn parts(&self) -> &[Part] {
        &self.0
    }

    /// The same words with `f` applied to each text (not to the names).
    #[must_use]
    pub fn map_text(self, mut f: impl FnMut(String) -> String) -> Self {
        Wording(
            self.0
                .into_iter()
                .map(|p| match p {
                    Part::Text(t) => Part::Text(f(t)),
                    name => name,
                })
                .collect(),
        )
    }
}

impl From<String> for Wording {
    fn from(text: String) -> Self {
        Wording::new().text(text)
    }
}

impl From<&str> for Wording {
    fn from(text: &str) -> Self {
        Wording::new().text(text)
    }
}

impl fmt::Display for Wording {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.0 {
            match part {
                Part::Text(t) => f.write_str(t)?,
                Part::Name { said, .. } => f.write_str(said)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kept_apart_from_the_text() {
        let w = Wording::new()
            .arg("end")
            .text(" must be after ")
            .arg("start")
            .text(": pass ")
            .keyword("start");
        assert_eq!(w.to_string(), "`end` must be after `start`: pass `start=`");
        let keys: Vec<_> = w
            .parts()
            .iter()
            .filter_map(|p| match p {
                Part::Name { key, .. } => Some(key.as_str()),
                Part::Text(_) => None,
            })
            .collect();
        assert_eq!(keys, ["end", "start", "start"]);
        let upper = w.map_text(|t| t.to_uppercase());
        assert_eq!(
            upper.to_string(),
            "`end` MUST BE AFTER `start`: PASS `start=`"
        );
    }
}
