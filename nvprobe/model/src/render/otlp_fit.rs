//! OTLP lines a container runtime does not split: containerd and Docker
//! cut a container's log line at 16 KiB into partial lines, which a log
//! shipper must then join again (the kubelet's CRI format marks them `P`).
//! A record whose OTLP line would be longer (a summary of a busy node: its
//! process table; a verdict with a long list of failed calls; a long
//! command line) is made shorter, the biggest part first: an array keeps
//! its first half, a string its first half and "…", the body likewise,
//! and `nvprobe.truncated` says what was cut. NDJSON keeps every record
//! whole.

use serde_json::Value;

/// The longest OTLP line written, its newline included: containerd's and
/// Docker's split size.
pub(super) const LINE_MAX: usize = 16 * 1024;

/// One step: halve the biggest array or string of `record`, or `body`
/// when it is bigger; false when nothing is left to cut.
pub(super) fn shrink(record: &mut Value, body: &mut String, cut: &mut Vec<String>) -> bool {
    let mut best: Option<(usize, Vec<PathPart>)> = None;
    let mut path = Vec::new();
    biggest(record, &mut path, &mut best);
    let body_size = body.len();
    match best {
        Some((size, p)) if size >= body_size && size > 64 => {
            let Some(node) = at(record, &p) else {
                return false;
            };
            let name = dotted(&p);
            match node {
                Value::Array(a) if a.len() > 1 => {
                    let n = a.len();
                    a.truncate(n / 2);
                    cut.push(format!("{name}: {} of {n} kept", a.len()));
                }
                Value::Array(a) => {
                    // One element too big: it is what gets cut next.
                    let Some(first) = a.first_mut() else {
                        return false;
                    };
                    let mut inner = std::mem::take(first);
                    let ok = shrink(&mut inner, &mut String::new(), cut);
                    a[0] = inner;
                    return ok;
                }
                Value::String(s) => {
                    halve(s);
                    cut.push(format!("{name}: cut to {} bytes", s.len()));
                }
                _ => return false,
            }
            true
        }
        _ if body_size > 64 => {
            halve(body);
            cut.push(format!("body: cut to {} bytes", body.len()));
            true
        }
        _ => false,
    }
}

#[derive(Clone, Debug)]
enum PathPart {
    Key(String),
    Index(usize),
}

fn dotted(p: &[PathPart]) -> String {
    let mut s = String::new();
    for part in p {
        match part {
            PathPart::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            PathPart::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// The serialized size of `v`, and in `best` the biggest array or string
/// found beneath it (with its path).
fn biggest(
    v: &Value,
    path: &mut Vec<PathPart>,
    best: &mut Option<(usize, Vec<PathPart>)>,
) -> usize {
    let size = match v {
        Value::Array(a) => {
            let (mut n, mut largest) = (2, 0);
            for (i, x) in a.iter().enumerate() {
                path.push(PathPart::Index(i));
                let one = biggest(x, path, best);
                path.pop();
                n += one + 1;
                largest = largest.max(one);
            }
            // An array that is mostly one element: that element is what
            // gets cut (a long argument, not the arguments after it).
            if largest * 2 > n {
                return n;
            }
            n
        }
        Value::Object(m) => {
            let mut n = 2;
            for (k, x) in m {
                path.push(PathPart::Key(k.clone()));
                n += k.len() + 4 + biggest(x, path, best);
                path.pop();
            }
            return n;
        }
        Value::String(s) => s.len() + 2,
        _ => return 8,
    };
    if best.as_ref().is_none_or(|(b, _)| size > *b) {
        *best = Some((size, path.clone()));
    }
    size
}

fn at<'a>(v: &'a mut Value, p: &[PathPart]) -> Option<&'a mut Value> {
    let mut v = v;
    for part in p {
        v = match part {
            PathPart::Key(k) => v.get_mut(k.as_str())?,
            PathPart::Index(i) => v.get_mut(*i)?,
        };
    }
    Some(v)
}

/// The first half of `s` (at a character's edge) and "…".
fn halve(s: &mut String) {
    let mut end = s.len() / 2;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push('…');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_biggest_part_is_halved_first_and_named() {
        let mut rec = json!({
            "type": "summary",
            "processes": (0..100).map(|i| json!({"pid": i, "comm": "python3"})).collect::<Vec<_>>(),
            "note": "short",
        });
        let mut body = "x".repeat(100);
        let mut cut = Vec::new();
        assert!(shrink(&mut rec, &mut body, &mut cut));
        assert_eq!(rec["processes"].as_array().map(Vec::len), Some(50));
        assert_eq!(cut, ["processes: 50 of 100 kept"]);
        // The body, once it is the biggest.
        let mut body = "é".repeat(4000);
        assert!(shrink(&mut rec, &mut body, &mut cut));
        assert!(body.ends_with('…') && body.len() < 4100, "{}", body.len());
        assert_eq!(cut[1], "body: cut to 4003 bytes");
        // A long string inside an object.
        let mut rec = json!({"process": {"cmdline": ["python3", "a".repeat(20000)]}});
        let mut body = String::new();
        let mut cut = Vec::new();
        assert!(shrink(&mut rec, &mut body, &mut cut));
        assert_eq!(cut, ["process.cmdline[1]: cut to 10003 bytes"]);
        // Nothing left worth cutting.
        let mut rec = json!({"a": 1});
        assert!(!shrink(&mut rec, &mut String::from("ok"), &mut Vec::new()));
    }
}

#[cfg(test)]
mod line_tests {
    use crate::attribution::ProcessInfo;
    use crate::render::{Clock, Format, Renderer, note::Note};

    /// A process with 4,000 arguments (a 50 KB identity): its OTLP line
    /// stays under 16 KiB, the resource's argument list goes first (its
    /// command line keeps 4 KiB), then the record's own list is halved.
    #[test]
    fn a_long_command_line_keeps_the_line_under_the_split_size() {
        let info = ProcessInfo {
            pid: 4242,
            comm: Some("python3".into()),
            cmdline: Some((0..4000).map(|i| format!("--arg{i}")).collect()),
            ..ProcessInfo::default()
        };
        let mut r = Renderer::new(Format::OtlpJson, Clock::now());
        let mut buf = bytes::BytesMut::new();
        r.note(&mut buf, 0, &Note::Process(&info))
            .expect("rendered");
        let line = String::from_utf8(buf.to_vec()).expect("utf8");
        assert!(line.len() <= super::LINE_MAX, "{} bytes", line.len());
        let v: serde_json::Value = serde_json::from_str(&line).expect("one JSON line");
        let res = v["resourceLogs"][0]["resource"]["attributes"]
            .as_array()
            .expect("resource");
        assert!(res.iter().all(|a| a["key"] != "process.command_args"));
        assert!(res.iter().any(|a| a["key"] == "process.command_line"));
        let attrs = v["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]["attributes"]
            .as_array()
            .expect("attributes");
        let cut = attrs
            .iter()
            .find(|a| a["key"] == "nvprobe.truncated")
            .expect("what was cut");
        assert!(cut.to_string().contains("cmdline: "), "{cut}");
    }
}
