//! A reader of the Prometheus text exposition format (what `/metrics`
//! serves): samples with their labels; comments and timestamps skipped.

use std::collections::BTreeMap;

/// One series' value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Sample {
    /// The value of label `key`, if the series has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }
}

/// A line that is not a sample, with its 1-based number.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct Error {
    pub line: usize,
    pub problem: String,
}

/// Every sample of `text`; NaN and infinite values are left out (unknown,
/// not a number to show).
pub fn parse(text: &str) -> Result<Vec<Sample>, Error> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let s = sample(line).map_err(|problem| Error {
            line: i + 1,
            problem,
        })?;
        if s.value.is_finite() {
            out.push(s);
        }
    }
    Ok(out)
}

fn sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(['{', ' ', '\t'])
        .ok_or("a name without a value")?;
    let name = line[..name_end].to_string();
    let (labels, rest) = if line[name_end..].starts_with('{') {
        labels(&line[name_end + 1..])?
    } else {
        (BTreeMap::new(), &line[name_end..])
    };
    let text = rest.split_whitespace().next().ok_or("no value")?;
    let value = match text {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        t => t
            .parse()
            .map_err(|_| format!("value {t:?} is not a number"))?,
    };
    Ok(Sample {
        name,
        labels,
        value,
    })
}

/// The labels after `{`, and what follows the closing `}`.
fn labels(mut s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut out = BTreeMap::new();
    loop {
        s = s.trim_start_matches([' ', ',']);
        if let Some(rest) = s.strip_prefix('}') {
            return Ok((out, rest));
        }
        let eq = s.find('=').ok_or("a label without `=`")?;
        let key = s[..eq].trim().to_string();
        let after = s[eq + 1..]
            .strip_prefix('"')
            .ok_or_else(|| format!("label {key}: value not quoted"))?;
        let (value, rest) = quoted(after).ok_or_else(|| format!("label {key}: unclosed quote"))?;
        out.insert(key, value);
        s = rest;
    }
}

/// The escaped string up to the closing quote, and what follows it.
fn quoted(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &s[i + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => out.push('\n'),
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_escapes_and_timestamps_are_read() {
        let text = "# HELP x y\nx{a=\"1\",b=\"q\\\"\\\\\\n\"} 2.5 1700000000\ny 3\nz NaN\n";
        let s = parse(text).expect("parses");
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].label("b"), Some("q\"\\\n"));
        assert_eq!(s[0].value, 2.5);
        assert_eq!(s[1].name, "y");
    }

    #[test]
    fn a_broken_line_names_its_number() {
        let e = parse("x 1\ny{a=\"1} 2\n").expect_err("unclosed");
        assert_eq!(e.line, 2);
    }
}
