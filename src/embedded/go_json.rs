//! Go's JSON syntax check in Go's words: `checkValid` of encoding/json's `scanner.go`, as forked in
//! sigs.k8s.io/json (internal/golang/encoding/json), which kube-apiserver's handlers decode request
//! bodies with. The standard library's scanner is the same state machine with the same messages.
//!
//! A refusal of a body that is not JSON then quotes what kube-apiserver quotes
//! (`unexpected end of JSON input`, `invalid character '}' after object key`), not serde_json's
//! wording. Only the syntax is checked here; the decoding stays serde_json's.

/// What the value being parsed is inside (Go's `parseObjectKey`, `parseObjectValue`,
/// `parseArrayValue`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parse {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

/// The scanner's next step function (Go's `state*` functions).
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    BeginValueOrEmpty,
    BeginValue,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    /// Inside `\u`, with this many hex digits read (0 to 3).
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// Inside the literal `word`, its byte `at` expected next.
    Literal {
        word: &'static str,
        at: usize,
    },
    Error,
}

/// Go's `maxNestingDepth`.
const MAX_NESTING_DEPTH: usize = 10000;

struct Scanner {
    step: State,
    end_top: bool,
    parse: Vec<Parse>,
    err: Option<String>,
}

/// Whether a step found an error (Go's `scanError`); every other result is alike to `checkValid`.
#[derive(PartialEq, Eq)]
enum Scan {
    Go,
    Error,
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

impl Scanner {
    fn new() -> Self {
        Scanner {
            step: State::BeginValue,
            end_top: false,
            parse: Vec::new(),
            err: None,
        }
    }

    fn error(&mut self, c: u8, context: &str) -> Scan {
        self.step = State::Error;
        self.err = Some(format!("invalid character {} {context}", quote_char(c)));
        Scan::Error
    }

    fn push(&mut self, c: u8, p: Parse) -> Scan {
        self.parse.push(p);
        if self.parse.len() <= MAX_NESTING_DEPTH {
            Scan::Go
        } else {
            self.error(c, "exceeded max depth")
        }
    }

    fn pop(&mut self) {
        self.parse.pop();
        if self.parse.is_empty() {
            self.step = State::EndTop;
            self.end_top = true;
        } else {
            self.step = State::EndValue;
        }
    }

    fn feed(&mut self, c: u8) -> Scan {
        match self.step {
            State::BeginValueOrEmpty => {
                if is_space(c) {
                    Scan::Go
                } else if c == b']' {
                    self.end_value(c)
                } else {
                    self.begin_value(c)
                }
            }
            State::BeginValue => self.begin_value(c),
            State::BeginStringOrEmpty => {
                if is_space(c) {
                    return Scan::Go;
                }
                if c == b'}' {
                    if let Some(last) = self.parse.last_mut() {
                        *last = Parse::ObjectValue;
                    }
                    return self.end_value(c);
                }
                self.begin_string(c)
            }
            State::BeginString => self.begin_string(c),
            State::EndValue => self.end_value(c),
            State::EndTop => self.end_top(c),
            State::InString => match c {
                b'"' => {
                    self.step = State::EndValue;
                    Scan::Go
                }
                b'\\' => {
                    self.step = State::InStringEsc;
                    Scan::Go
                }
                c if c < 0x20 => self.error(c, "in string literal"),
                _ => Scan::Go,
            },
            State::InStringEsc => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {
                    self.step = State::InString;
                    Scan::Go
                }
                b'u' => {
                    self.step = State::InStringEscU(0);
                    Scan::Go
                }
                _ => self.error(c, "in string escape code"),
            },
            State::InStringEscU(n) => {
                if c.is_ascii_hexdigit() {
                    self.step = if n == 3 {
                        State::InString
                    } else {
                        State::InStringEscU(n + 1)
                    };
                    Scan::Go
                } else {
                    self.error(c, "in \\u hexadecimal character escape")
                }
            }
            State::Neg => match c {
                b'0' => {
                    self.step = State::Zero;
                    Scan::Go
                }
                b'1'..=b'9' => {
                    self.step = State::One;
                    Scan::Go
                }
                _ => self.error(c, "in numeric literal"),
            },
            State::One if c.is_ascii_digit() => Scan::Go,
            State::One | State::Zero => match c {
                b'.' => {
                    self.step = State::Dot;
                    Scan::Go
                }
                b'e' | b'E' => {
                    self.step = State::E;
                    Scan::Go
                }
                _ => self.end_value(c),
            },
            State::Dot => {
                if c.is_ascii_digit() {
                    self.step = State::Dot0;
                    Scan::Go
                } else {
                    self.error(c, "after decimal point in numeric literal")
                }
            }
            State::Dot0 => match c {
                b'0'..=b'9' => Scan::Go,
                b'e' | b'E' => {
                    self.step = State::E;
                    Scan::Go
                }
                _ => self.end_value(c),
            },
            State::E if c == b'+' || c == b'-' => {
                self.step = State::ESign;
                Scan::Go
            }
            State::E | State::ESign => {
                if c.is_ascii_digit() {
                    self.step = State::E0;
                    Scan::Go
                } else {
                    self.error(c, "in exponent of numeric literal")
                }
            }
            State::E0 if c.is_ascii_digit() => Scan::Go,
            State::E0 => self.end_value(c),
            State::Literal { word, at } => {
                let want = word.as_bytes()[at];
                if c == want {
                    self.step = if at + 1 == word.len() {
                        State::EndValue
                    } else {
                        State::Literal { word, at: at + 1 }
                    };
                    Scan::Go
                } else {
                    self.error(c, &format!("in literal {word} (expecting '{}')", want as char))
                }
            }
            State::Error => Scan::Error,
        }
    }

    fn begin_value(&mut self, c: u8) -> Scan {
        if is_space(c) {
            return Scan::Go;
        }
        let literal = |word| State::Literal { word, at: 1 };
        match c {
            b'{' => {
                self.step = State::BeginStringOrEmpty;
                return self.push(c, Parse::ObjectKey);
            }
            b'[' => {
                self.step = State::BeginValueOrEmpty;
                return self.push(c, Parse::ArrayValue);
            }
            b'"' => self.step = State::InString,
            b'-' => self.step = State::Neg,
            b'0' => self.step = State::Zero,
            b'1'..=b'9' => self.step = State::One,
            b't' => self.step = literal("true"),
            b'f' => self.step = literal("false"),
            b'n' => self.step = literal("null"),
            _ => return self.error(c, "looking for beginning of value"),
        }
        Scan::Go
    }

    fn begin_string(&mut self, c: u8) -> Scan {
        if is_space(c) {
            return Scan::Go;
        }
        if c == b'"' {
            self.step = State::InString;
            return Scan::Go;
        }
        self.error(c, "looking for beginning of object key string")
    }

    fn end_value(&mut self, c: u8) -> Scan {
        let Some(&ps) = self.parse.last() else {
            self.step = State::EndTop;
            self.end_top = true;
            return self.end_top(c);
        };
        if is_space(c) {
            self.step = State::EndValue;
            return Scan::Go;
        }
        match (ps, c) {
            (Parse::ObjectKey, b':') => {
                if let Some(last) = self.parse.last_mut() {
                    *last = Parse::ObjectValue;
                }
                self.step = State::BeginValue;
                Scan::Go
            }
            (Parse::ObjectKey, _) => self.error(c, "after object key"),
            (Parse::ObjectValue, b',') => {
                if let Some(last) = self.parse.last_mut() {
                    *last = Parse::ObjectKey;
                }
                self.step = State::BeginString;
                Scan::Go
            }
            (Parse::ObjectValue, b'}') | (Parse::ArrayValue, b']') => {
                self.pop();
                Scan::Go
            }
            (Parse::ObjectValue, _) => self.error(c, "after object key:value pair"),
            (Parse::ArrayValue, b',') => {
                self.step = State::BeginValue;
                Scan::Go
            }
            (Parse::ArrayValue, _) => self.error(c, "after array element"),
        }
    }

    /// Go's `stateEndTop` records the error but answers `scanEnd`; the next byte (or the end)
    /// then reports it.
    fn end_top(&mut self, c: u8) -> Scan {
        if !is_space(c) {
            self.error(c, "after top-level value");
        }
        Scan::Go
    }

    /// Go's `eof`: the value must be complete once a space is fed.
    fn eof(&mut self) -> Option<String> {
        if self.err.is_some() {
            return self.err.take();
        }
        if self.end_top {
            return None;
        }
        self.feed(b' ');
        if self.end_top && self.err.is_none() {
            return None;
        }
        Some(
            self.err
                .take()
                .unwrap_or_else(|| "unexpected end of JSON input".to_string()),
        )
    }
}

/// The message of the first syntax error Go's `checkValid` finds in `data`, or `None` when Go reads
/// it as one JSON value.
pub fn syntax_error(data: &[u8]) -> Option<String> {
    let mut s = Scanner::new();
    for &c in data {
        if s.feed(c) == Scan::Error {
            return s.err.take();
        }
    }
    s.eof()
}

/// kube-apiserver's `summarizeData` (handlers/rest.go): `<empty>`, the first `max` bytes of a body
/// that starts with `{` as text, any other body's in hex; ` ...` when cut.
pub fn summarize(data: &[u8], max: usize) -> String {
    let cut = data.len() > max;
    let head = &data[..data.len().min(max)];
    let text = match data.first() {
        None => return "<empty>".to_string(),
        Some(b'{') => String::from_utf8_lossy(head).into_owned(),
        Some(_) => head.iter().map(|b| format!("{b:02x}")).collect(),
    };
    if cut { format!("{text} ...") } else { text }
}

/// Go's `quoteChar`: the byte as a rune (`string(c)`) in `strconv.Quote`'s escapes, in single quotes.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".to_string(),
        b'"' => "'\"'".to_string(),
        _ => format!("'{}'", go_quote_body(c)),
    }
}

/// The inside of `strconv.Quote(string(rune(c)))`.
fn go_quote_body(c: u8) -> String {
    match c {
        0x07 => r"\a".into(),
        0x08 => r"\b".into(),
        0x0c => r"\f".into(),
        b'\n' => r"\n".into(),
        b'\r' => r"\r".into(),
        b'\t' => r"\t".into(),
        0x0b => r"\v".into(),
        b'\\' => r"\\".into(),
        0x20..=0x7e => (c as char).to_string(),
        0x00..=0x1f | 0x7f => format!("\\x{c:02x}"),
        // strconv.IsPrint is false for U+0080..U+00A0 and U+00AD.
        0x80..=0xa0 | 0xad => format!("\\u{c:04x}"),
        _ => char::from(c).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages of encoding/json's scanner_test.go `TestSyntaxErrors`-style cases and of
    /// decode_test.go's syntax errors (Go 1.2x, the same scanner as sigs.k8s.io/json's fork that
    /// kube-apiserver v1.36.3's patch handler decodes with).
    #[test]
    fn syntax_errors_read_as_gos_scanner_words_them() {
        let cases: &[(&str, Option<&str>)] = &[
            (r#"{"data":"#, Some("unexpected end of JSON input")),
            ("", Some("unexpected end of JSON input")),
            ("   ", Some("unexpected end of JSON input")),
            (
                r#"{"X": "foo", "Y"}"#,
                Some("invalid character '}' after object key"),
            ),
            (r#"[1, 2, 3+]"#, Some("invalid character '+' after array element")),
            (
                r#"{"X":12x}"#,
                Some("invalid character 'x' after object key:value pair"),
            ),
            ("[2, 3", Some("unexpected end of JSON input")),
            (r#"{"F3": -}"#, Some("invalid character '}' in numeric literal")),
            (
                "{x}",
                Some("invalid character 'x' looking for beginning of object key string"),
            ),
            (
                "{\"a\":tru}",
                Some("invalid character '}' in literal true (expecting 'e')"),
            ),
            // At the end Go feeds a space, so an unfinished literal names it.
            (
                "nul",
                Some("invalid character ' ' in literal null (expecting 'l')"),
            ),
            ("-", Some("invalid character ' ' in numeric literal")),
            (
                "nulx",
                Some("invalid character 'x' in literal null (expecting 'l')"),
            ),
            (
                "fals",
                Some("invalid character ' ' in literal false (expecting 'e')"),
            ),
            ("\"abc", Some("unexpected end of JSON input")),
            (
                "1.e5",
                Some("invalid character 'e' after decimal point in numeric literal"),
            ),
            (
                "1e+x",
                Some("invalid character 'x' in exponent of numeric literal"),
            ),
            ("{} {}", Some("invalid character '{' after top-level value")),
            ("01", Some("invalid character '1' after top-level value")),
            ("\"a\u{1}\"", Some("invalid character '\\x01' in string literal")),
            ("\"a\nb\"", Some("invalid character '\\n' in string literal")),
            (r#""\x""#, Some("invalid character 'x' in string escape code")),
            (
                r#""\u12g4""#,
                Some("invalid character 'g' in \\u hexadecimal character escape"),
            ),
            (
                "'a'",
                Some("invalid character '\\'' looking for beginning of value"),
            ),
            (
                "[\"a\" \"b\"]",
                Some("invalid character '\"' after array element"),
            ),
            (
                "\\",
                Some("invalid character '\\\\' looking for beginning of value"),
            ),
            // A byte of a multi-byte character, read as the rune of its value.
            ("é", Some("invalid character 'Ã' looking for beginning of value")),
            (
                "\u{a0}",
                Some("invalid character 'Â' looking for beginning of value"),
            ),
            (r#"{"a":[1,{"b":null}],"c":-0.5e-3}"#, None),
            (" [ ] ", None),
            ("{}", None),
            ("\"\\u00e9\"", None),
        ];
        for (input, want) in cases {
            assert_eq!(syntax_error(input.as_bytes()).as_deref(), *want, "{input:?}");
        }
    }

    #[test]
    fn bytes_above_ascii_quote_as_go_runes() {
        assert_eq!(quote_char(0x80), r"'\u0080'");
        assert_eq!(quote_char(0xad), r"'\u00ad'");
        assert_eq!(quote_char(0xff), "'ÿ'");
        assert_eq!(quote_char(0x7f), r"'\x7f'");
    }

    #[test]
    fn nesting_past_gos_limit_is_refused_in_its_words() {
        let deep = "[".repeat(MAX_NESTING_DEPTH + 1);
        assert_eq!(
            syntax_error(deep.as_bytes()).as_deref(),
            Some("invalid character '[' exceeded max depth")
        );
        let ok = format!(
            "{}{}",
            "[".repeat(MAX_NESTING_DEPTH),
            "]".repeat(MAX_NESTING_DEPTH)
        );
        assert_eq!(syntax_error(ok.as_bytes()), None);
    }

    #[test]
    fn bodies_are_summarized_as_kube_apiservers_handlers_do() {
        assert_eq!(summarize(b"", 30), "<empty>");
        assert_eq!(summarize(b"{not json", 30), "{not json");
        assert_eq!(
            summarize(b"{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\"", 30),
            "{\"kind\":\"ConfigMap\",\"apiVersio ..."
        );
        assert_eq!(summarize(b"not", 30), "6e6f74");
        assert_eq!(summarize(&[b'x'; 31], 30), format!("{} ...", "78".repeat(30)));
    }
}
