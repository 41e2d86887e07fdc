//! The generator on the trimmed real headers of xtask/testdata/gen-tables,
//! and the committed tables checked against it.

use std::{collections::BTreeMap, path::PathBuf};

use super::{
    scan::{class_file_number, is_class_name, nvoc_params},
    *,
};

const SAMPLE_TAGS: [&str; 2] = ["535.261.03", "580.142"];

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn sample() -> Vec<(Tag, TagTables)> {
    SAMPLE_TAGS
        .iter()
        .map(|t| {
            let dir = manifest().join("testdata/gen-tables").join(t);
            (Tag::new(t).unwrap(), scan_checkout(&dir).unwrap())
        })
        .collect()
}

fn rows(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.starts_with('#')).collect()
}

fn committed(file: &str) -> (String, Table) {
    let path = manifest().join("../nvprobe/model/data").join(file);
    let text = fs::read_to_string(&path).unwrap();
    let table = Table::parse(&text).unwrap();
    (text, table)
}

#[test]
fn sample_controls_rows() {
    let text = render_controls(&sample());
    assert_eq!(
        rows(&text),
        [
            "0x00000101\tNV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION\t580\t40\tNV0000_CTRL_SYSTEM_GET_BUILD_VERSION_PARAMS\t",
            "0x00000502\tNV0000_CTRL_CMD_GET_SYSTEM_EVENT_STATUS\t535\t8\tNV0000_CTRL_GET_SYSTEM_EVENT_STATUS_PARAMS\t",
            // The union's member types are not in the sample: no size, no guess.
            "0x00000502\tNV0000_CTRL_CMD_GET_SYSTEM_EVENT_DATA\t580\t\tNV0000_CTRL_GET_SYSTEM_EVENT_DATA_PARAMS\t",
            "0x00000d04\tNV0000_CTRL_CMD_CLIENT_SET_INHERITED_SHARE_POLICY\t535,580\t12\tNV0000_CTRL_CLIENT_SET_INHERITED_SHARE_POLICY_PARAMS\t",
            "0x2080182a\tNV2080_CTRL_CMD_BUS_GET_PCIE_SUPPORTED_GPU_ATOMICS\t535,580\t104,112\tNV2080_CTRL_CMD_BUS_GET_PCIE_SUPPORTED_GPU_ATOMICS_PARAMS\t",
            "0xc36f0101\tNVC36F_CTRL_GET_CLASS_ENGINEID\t535\t\tNVC36F_CTRL_GET_CLASS_ENGINEID_PARAMS\tNVC56F_CTRL_GET_CLASS_ENGINEID",
            // Index in the finn comment only; the struct comes from the NVOC table.
            "0xcb330101\tNV_CONF_COMPUTE_CTRL_CMD_SYSTEM_GET_CAPABILITIES\t580\t6\tNV_CONF_COMPUTE_CTRL_CMD_SYSTEM_GET_CAPABILITIES_PARAMS\t",
        ]
    );
    assert!(text.starts_with(&format!(
        "{GENERATED_BY} 535.261.03, 580.142: src/common/sdk/nvidia/inc/ctrl/"
    )));
    assert!(text.contains("\n# versions: 535=535.261.03 580=580.142\n"));
}

#[test]
fn sample_classes_rows() {
    let text = render_classes(&sample());
    assert_eq!(
        rows(&text),
        [
            "0x0000\tNV01_ROOT\t535,580\tNV01_NULL_OBJECT,NV1_NULL_OBJECT,NV1_ROOT",
            "0x0041\tNV01_ROOT_CLIENT\t535,580\tNV04_MEMORY",
        ]
    );
}

#[test]
fn sample_layout() {
    let s = sample();
    let f = s[1]
        .1
        .layout("NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_PARAMS")
        .unwrap();
    let at: Vec<(u64, u64, &str)> = f
        .iter()
        .map(|f| (f.offset, f.size, f.name.as_str()))
        .collect();
    assert_eq!(
        at,
        [
            (0, 4, "sizeOfStrings"),
            (8, 8, "pDriverVersionBuffer"),
            (16, 8, "pVersionBuffer"),
            (24, 8, "pTitleBuffer"),
            (32, 4, "changelistNumber"),
            (36, 4, "officialChangelistNumber"),
        ]
    );
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    assert!(parse_srcs(&[]).is_err());
    assert!(parse_srcs(&["580.142".into()]).is_err());
    assert!(parse_srcs(&["latest=/x".into()]).is_err());
    assert!(parse_srcs(&["580.142=/a".into(), "580.65.06=/b".into()]).is_err());
    let ok = parse_srcs(&["580.142=/b".into(), "535.261.03=/a".into()]).unwrap();
    assert_eq!(ok[0].0.label, "535");
    assert!(scan_checkout(Path::new("/nonexistent")).is_err());
    assert!(Table::parse("no header\n").is_err());
    assert!(Table::parse("# versions: 5=5.1\n# columns: a, b\n0x1\n").is_err());
}

#[test]
fn nvoc_param_sizes() {
    let mut m = BTreeMap::new();
    nvoc_params(
        "        /*methodId=*/   0x2080220cu,\n        /*paramSize=*/  0 /* Singleton parameter list */,\n\
         /*methodId=*/ 0x20800110u,\n /*paramSize=*/ sizeof(NV2080_CTRL_GPU_GET_NAME_STRING_PARAMS),\n",
        &mut m,
    );
    assert_eq!(m[&0x2080220c], [None].into());
    assert_eq!(
        m[&0x20800110],
        [Some("NV2080_CTRL_GPU_GET_NAME_STRING_PARAMS".to_string())].into()
    );
}

#[test]
fn class_files() {
    assert_eq!(class_file_number("class/clc372sw.h"), Some(0xc372));
    assert_eq!(class_file_number("class/cl0000.h"), Some(0));
    assert_eq!(class_file_number("class/clzz00.h"), None);
    assert!(is_class_name("VOLTA_CHANNEL_GPFIFO_A", 0xc36f));
    assert!(!is_class_name("NVC36F_SET_OBJECT", 0xc36f));
    assert!(!is_class_name("NV03E_TYPEDEF", 0x3e));
}

#[test]
fn coverage_reads_ioctl_controls() {
    let mut seen = BTreeMap::new();
    let bad = coverage::controls_in(
        "{\"type\":\"ioctl\",\"args\":{\"control\":\"0xd04\",\"paramsSize\":12}}\n\
         {\"type\":\"ioctl\",\"args\":{\"control\":\"0xd04\",\"paramsSize\":12}}\n\
         {\"type\":\"exit\",\"args\":{\"control\":\"0x1\"}}\nnot json\n",
        "f.ndjson",
        &mut seen,
    );
    assert_eq!(bad, 1);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[&0xd04].files["f.ndjson"], 2);
    assert_eq!(seen[&0xd04].sizes, [12].into());
}

/// Sorted, (number, version) unique, header naming the tags, cells that
/// hold one value or one per version.
fn check_well_formed(table: &Table, value_columns: &[&str]) {
    assert!(
        table.first_line.starts_with(GENERATED_BY),
        "{}",
        table.first_line
    );
    assert!(table.first_line.ends_with("; do not edit"));
    for (label, full) in &table.tags {
        assert!(
            table.first_line.contains(full.as_str()),
            "header lacks {full}"
        );
        assert_eq!(Tag::new(full).unwrap().label, *label);
    }
    let order: Vec<&str> = table.tags.iter().map(|(l, _)| l.as_str()).collect();
    let vcol = table.columns.iter().position(|c| c == "versions").unwrap();
    let mut seen = BTreeSet::new();
    let mut last = 0;
    for r in &table.rows {
        assert!(r.number >= last, "0x{:x} out of order", r.number);
        last = r.number;
        let name = &r.cells[1];
        assert!(!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        let labels: Vec<&str> = r.cells[vcol].split(',').collect();
        let idx: Vec<usize> = labels
            .iter()
            .map(|l| order.iter().position(|o| o == l).unwrap())
            .collect();
        assert!(
            idx.windows(2).all(|w| w[0] < w[1]),
            "versions of 0x{:x}",
            r.number
        );
        for l in &labels {
            assert!(
                seen.insert((r.number, l.to_string())),
                "0x{:x} twice for {l}",
                r.number
            );
        }
        for c in value_columns {
            for l in &labels {
                table.cell_for(r, c, l).unwrap();
            }
        }
    }
}

#[test]
fn committed_tables_are_well_formed() {
    let (_, controls) = committed(CONTROLS_TSV);
    assert_eq!(
        controls.columns,
        ["control", "name", "versions", "size", "params", "aliases"]
    );
    check_well_formed(&controls, &["size", "params"]);
    let size = controls.columns.iter().position(|c| c == "size").unwrap();
    for r in &controls.rows {
        assert!(
            r.cells[size]
                .split(',')
                .all(|s| s.is_empty() || s.parse::<u64>().is_ok())
        );
    }
    let (_, classes) = committed(CLASSES_TSV);
    assert_eq!(classes.columns, ["class", "name", "versions", "aliases"]);
    check_well_formed(&classes, &[]);
    assert!(classes.rows.iter().all(|r| r.number <= 0xffff));
}

/// Every fact the sample yields for a tag is in the committed table for
/// the same tag: a table that drifts from its generator fails here.
#[test]
fn committed_tables_hold_the_sample() {
    let (_, controls) = committed(CONTROLS_TSV);
    let (_, classes) = committed(CLASSES_TSV);
    for (tag, t) in sample() {
        for table in [&controls, &classes] {
            assert!(
                table.tags.contains(&(tag.label.clone(), tag.full.clone())),
                "{} not in table",
                tag.full
            );
        }
        for (&n, c) in &t.controls {
            let r = controls
                .row_for(n, &tag.label)
                .unwrap()
                .unwrap_or_else(|| panic!("0x{n:x} {}", tag.label));
            assert_eq!(r.cells[1], c.name);
            let aliases: BTreeSet<String> = r.cells[5].split(',').map(str::to_string).collect();
            assert!(c.aliases.is_subset(&aliases), "aliases of 0x{n:x}");
            if let Some(s) = c.size {
                assert_eq!(
                    controls.cell_for(r, "size", &tag.label).unwrap(),
                    s.to_string(),
                    "size of 0x{n:x}"
                );
            }
            if let Some(p) = &c.params {
                assert_eq!(&controls.cell_for(r, "params", &tag.label).unwrap(), p);
            }
        }
        for (&n, c) in &t.classes {
            let r = classes.row_for(n, &tag.label).unwrap().unwrap();
            assert_eq!(r.cells[1], c.name);
            let aliases: BTreeSet<String> = r.cells[3].split(',').map(str::to_string).collect();
            assert!(c.aliases.is_subset(&aliases), "aliases of class 0x{n:x}");
        }
    }
}
