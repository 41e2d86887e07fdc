//! The H200 run of issue 26's ten back-to-back starts (the first run's
//! recording, `tests/scripts/restart-ten.sh`): the libcuda hooks went in as
//! uprobe_multi links, the probes were left to the kernel, and the cuInit
//! verdict rests on the uprobe; every record fits the schema.

mod common;

use common::fixture;
use nvprobe_model::render::schema::validate;
use serde_json::Value;

#[test]
fn the_restart_run_hooked_libcuda_through_uprobe_multi_and_left_removal_to_the_kernel() {
    let text = std::fs::read_to_string(fixture("h200-580.159.04-restart-run1.ndjson"))
        .expect("fixture present");
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    for r in &records {
        validate(r).unwrap_or_else(|e| panic!("{e}\n{r}"));
    }
    let start = &records[0];
    assert_eq!(start["type"], "start");
    assert_eq!(start["libcuda_attach"], "uprobe_multi", "{start}");
    let libs = start["libcuda"].as_array().expect("libcuda");
    assert_eq!(libs.len(), 3, "{libs:?}");
    for l in libs {
        assert_eq!(l["via"], "uprobe_multi", "{l}");
        assert_eq!(l["functions"].as_array().map(Vec::len), Some(58), "{l}");
    }
    let removal = start["probe_removal"].as_str().expect("probe_removal");
    assert!(
        removal.starts_with("kernel: ") && removal.contains("private bpffs (fsmount)"),
        "{removal}"
    );
    let v = records
        .iter()
        .find(|r| r["type"] == "cuinit")
        .expect("a cuInit verdict");
    assert_eq!(
        (
            v["class"].as_str(),
            v["result"].as_str(),
            v["curesult"].as_str()
        ),
        (Some("cuda"), Some("ok"), Some("CUDA_SUCCESS (0)")),
        "{v}"
    );
    assert_eq!(
        v["source"],
        "libcuda uprobe (cuInit's return) and driver calls"
    );
    // cuInit's own entry and return came through the uprobe_multi links.
    let cuinit_calls = records
        .iter()
        .filter(|r| r["type"] == "cuda" && r["pid"] == v["pid"] && r["func"] == "cuInit")
        .count();
    assert_eq!(cuinit_calls, 2, "cuInit's enter and return records");
}
