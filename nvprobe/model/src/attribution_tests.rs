//! Tests of the attribution (attribution.rs): containers, pods, limits,
//! the identity read from /proc.

/// The runtimes' own records of a container, as their public sources
/// write them: containerd's CRI plugin annotates the OCI spec
/// (pkg/cri/annotations: io.kubernetes.cri.sandbox-name, …), CRI-O
/// too (pkg/annotations: io.kubernetes.pod.name, …), cri-dockerd sets
/// docker labels (io.kubernetes.pod.name, …).
#[test]
fn kubernetes_names_come_from_each_runtimes_record() {
    let containerd = serde_json::json!({"ociVersion": "1.1.0", "annotations": {
        "io.kubernetes.cri.container-type": "container",
        "io.kubernetes.cri.sandbox-name": "trainer-0",
        "io.kubernetes.cri.sandbox-namespace": "ml",
        "io.kubernetes.cri.container-name": "pytorch",
        "io.kubernetes.cri.sandbox-uid": "0f1e2d3c-4b5a-4697-8877-665544332211"}});
    let crio = serde_json::json!({"annotations": {
        "io.kubernetes.pod.name": "infer-7f9c",
        "io.kubernetes.pod.namespace": "serving",
        "io.kubernetes.container.name": "triton"}});
    let docker = serde_json::json!({"Config": {"Labels": {
        "io.kubernetes.pod.name": "job-x",
        "io.kubernetes.pod.namespace": "default",
        "io.kubernetes.container.name": "main"}}});
    let n = |p: &str, ns: &str, c: &str| KubeNames {
        pod_name: Some(p.into()),
        pod_namespace: Some(ns.into()),
        container_name: Some(c.into()),
    };
    assert_eq!(kube_names(&containerd), n("trainer-0", "ml", "pytorch"));
    assert_eq!(kube_names(&crio), n("infer-7f9c", "serving", "triton"));
    assert_eq!(kube_names(&docker), n("job-x", "default", "main"));
    // A plain docker container has no such labels; odd values are
    // left out, not shown.
    assert_eq!(
        kube_names(&serde_json::json!({"Config": {"Labels": {}}})),
        KubeNames::default()
    );
    let odd = serde_json::json!({"annotations": {"io.kubernetes.pod.name": "a\u{1b}[31mb", "io.kubernetes.pod.namespace": "x".repeat(300)}});
    assert_eq!(kube_names(&odd), KubeNames::default());
}

#[test]
fn runtime_records_are_found_only_for_plain_ids() {
    let id = "ab".repeat(32);
    assert_eq!(
        runtime_record("containerd", &id).as_deref(),
        Some(
            format!("run/containerd/io.containerd.runtime.v2.task/k8s.io/{id}/config.json")
                .as_str()
        )
    );
    assert!(runtime_record("cri-o", &id).is_some_and(|p| p.ends_with("/userdata/config.json")));
    assert!(runtime_record("docker", &id).is_some_and(|p| p.ends_with("config.v2.json")));
    assert_eq!(runtime_record("podman", &id), None);
    assert_eq!(runtime_record("containerd", "../../../etc/shadow"), None);
    assert_eq!(
        runtime_record("containerd", &format!("{}/..", &id[..61])),
        None
    );
}

use super::*;

const ID: &str = "4f6c5a0e1d2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5";

/// Real cgroup v2 path shapes, as each runtime writes them (systemd and
/// cgroupfs drivers; docs of docker, containerd, CRI-O, podman,
/// kubelet, LXC and Proxmox).
#[test]
fn cgroup_paths_of_each_runtime() {
    let c = |p: &str| parse_cgroup(p);
    let docker = c(&format!("/system.slice/docker-{ID}.scope")).expect("docker");
    assert_eq!(
        (docker.runtime.as_str(), docker.id.as_deref()),
        ("docker", Some(ID))
    );
    let docker_fs = c(&format!("/docker/{ID}")).expect("docker cgroupfs");
    assert_eq!(docker_fs.runtime, "docker");
    let podman = c(&format!(
        "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope/container"
    ))
    .expect("podman");
    assert_eq!(
        (podman.runtime.as_str(), podman.id.as_deref()),
        ("podman", Some(ID))
    );
    let k8s_containerd = c(&format!(
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice/cri-containerd-{ID}.scope"
    ))
    .expect("k8s");
    assert_eq!(k8s_containerd.runtime, "containerd");
    assert_eq!(k8s_containerd.id.as_deref(), Some(ID));
    assert_eq!(
        k8s_containerd.pod_uid.as_deref(),
        Some("0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b")
    );
    assert_eq!(k8s_containerd.qos.as_deref(), Some("burstable"));
    let k8s_crio = c(&format!(
        "/kubepods.slice/kubepods-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice/crio-{ID}.scope"
    ))
    .expect("crio");
    assert_eq!(k8s_crio.runtime, "cri-o");
    assert_eq!(k8s_crio.qos.as_deref(), Some("guaranteed"));
    let k8s_cgroupfs = c(&format!(
        "/kubepods/besteffort/pod0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b/{ID}"
    ))
    .expect("cgroupfs");
    assert_eq!(k8s_cgroupfs.runtime, "kubernetes");
    assert_eq!(k8s_cgroupfs.qos.as_deref(), Some("besteffort"));
    let lxc = c("/lxc/101/ns/user.slice").expect("proxmox");
    assert_eq!(
        (lxc.runtime.as_str(), lxc.id.as_deref()),
        ("lxc", Some("101"))
    );
    let lxc_payload = c("/lxc.payload.gpubox/system.slice").expect("lxc 4");
    assert_eq!(lxc_payload.id.as_deref(), Some("gpubox"));
    assert_eq!(c("/user.slice/user-0.slice/session-3.scope"), None);
    assert_eq!(c("/"), None);
    assert_eq!(c("/system.slice/docker-short.scope"), None);
}

fn gpus(n: u32) -> Vec<HostGpu> {
    (0..n)
        .map(|i| HostGpu {
            minor: i,
            uuid: Some(format!("GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd")),
            pci: Some(format!("0000:0{i}:00.0")),
            model: None,
        })
        .collect()
}

#[test]
fn visible_devices_resolve_like_cuda() {
    let g = gpus(8);
    assert_eq!(resolve_visible("5", &g), Ok(vec![5]));
    assert_eq!(resolve_visible("3,1", &g), Ok(vec![3, 1]));
    // CUDA stops at the first invalid entry.
    assert_eq!(resolve_visible("2,9,4", &g), Ok(vec![2]));
    assert_eq!(resolve_visible("GPU-00000006", &g), Ok(vec![6]));
    let none = resolve_visible("-1", &g).expect_err("-1 hides all");
    assert!(
        none.contains("matches none of this host's 8 GPUs"),
        "{none}"
    );
    assert!(
        resolve_visible("", &g)
            .expect_err("empty")
            .contains("empty")
    );
    assert!(resolve_visible("GPU-ffff", &g).is_err());
    // A bare prefix names none, even of one GPU (cuInit 100 on the H100).
    assert!(resolve_visible("GPU-", &gpus(1)).is_err());
}

/// CUDA refuses a list that names one GPU twice in one form (the H100
/// host: "0,0" made cuInit return 101), not an index and the same GPU's
/// UUID (there "0,GPU-…" gave cuInit 0 and a context); what comes after
/// an invalid entry is not read.
#[test]
fn a_visible_list_that_names_a_gpu_twice_is_told() {
    let g = gpus(8);
    assert_eq!(
        visible_repeat("0,0", &g).as_deref(),
        Some("CUDA_VISIBLE_DEVICES=0,0 names /dev/nvidia0 twice (0)")
    );
    assert_eq!(visible_repeat("3,1,GPU-00000003", &g), None);
    assert_eq!(
        visible_repeat("GPU-00000003,1,GPU-00000003", &g).as_deref(),
        Some(
            "CUDA_VISIBLE_DEVICES=GPU-00000003,1,GPU-00000003 names /dev/nvidia3 twice (GPU-00000003)"
        )
    );
    // The selection itself: each GPU once (CUDA's answer to a repeat is
    // the rule's, where cuInit's 101 shows it).
    assert_eq!(resolve_visible("1,1", &g), Ok(vec![1]));
    // A UUID prefix two GPUs share names neither.
    assert_eq!(visible_repeat("0,GPU-0000000", &g), None);
    // Indices written two ways, the host's GPUs unknown.
    assert!(visible_repeat("0,00", &[]).is_some());
    assert_eq!(visible_repeat("0,1,2", &g), None);
    assert_eq!(visible_repeat("0,9,0", &g), None);
    // The host's GPUs unknown: the same index twice is still a repeat.
    assert_eq!(
        visible_repeat("2, 2", &[]).as_deref(),
        Some("CUDA_VISIBLE_DEVICES=2, 2 names device 2 twice (2)")
    );
}

#[test]
fn command_lines_read_like_a_shell() {
    let p = ProcessInfo {
        cmdline: Some(vec![
            "python3".into(),
            "-c".into(),
            "import torch; x='a'".into(),
        ]),
        ..ProcessInfo::default()
    };
    assert_eq!(
        p.cmdline_text(200).as_deref(),
        Some("python3 -c 'import torch; x='\\''a'\\'''")
    );
    assert_eq!(p.cmdline_text(10).as_deref(), Some("python3 -c…"));
}
