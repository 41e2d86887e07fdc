//! The Perfetto export's tests: the typed and the recorded readings of
//! every fixture give the same trace.

use super::*;

/// A `--raw` recording exported from its typed items and the same
/// records read as JSON (a recording made without --raw) give the same
/// trace, byte for byte, on every fixture.
#[test]
fn typed_items_and_recorded_json_export_the_same_trace() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("fixtures") {
        let path = e.expect("entry").path();
        if path.extension().is_none_or(|x| x != "ndjson") {
            continue;
        }
        let text = std::fs::read(&path).expect("read");
        let (mut typed, mut json) = (Exporter::default(), Exporter::default());
        nvprobe_model::replay::replay(&text[..], None, |t, item| {
            typed.item(t, &item);
            json.record(&item.recorded(t));
        })
        .expect("read");
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let sa = typed.finish(&mut a).expect("write");
        json.finish(&mut b).expect("write");
        assert!(a == b, "{}: the two traces differ", path.display());
        n += usize::from(sa.slices > 0);
    }
    assert!(n >= 20, "{n} fixtures with slices");
}
