"""After converge, in container mode: what the gpu_driver role wrote and enabled is really there."""

import json

testinfra_hosts = ["ansible://gpu_hosts"]

NVIDIA_REPO = "https://developer.download.nvidia.com/compute/cuda/repos/{distro}/{arch}/"
EXPECTED = {
    # host -> (NVIDIA's repository name for its Debian release, power limit in watts, kernel parameters)
    "sm120-drv-bookworm": ("debian12", "600", "iommu=pt pcie_aspm=off pcie_port_pm=off"),
    "sm120-drv-trixie": ("debian13", "450", None),
}
GPU_COUNT = 8


def expected(host):
    return EXPECTED[host.backend.get_hostname()]


def nvidia_arch(host):
    return {"x86_64": "x86_64", "aarch64": "sbsa"}[host.check_output("uname -m")]


def test_the_repository_is_nvidias_for_the_release_signed_by_the_installed_key(host):
    distro, _watts, _params = expected(host)
    sources = host.file("/etc/apt/sources.list.d/nvidia-cuda.sources")
    assert sources.mode == 0o644
    lines = [line for line in sources.content_string.splitlines() if line and not line.startswith("#")]
    assert lines == [
        "Types: deb",
        "URIs: " + NVIDIA_REPO.format(distro=distro, arch=nvidia_arch(host)),
        "Suites: /",
        "Signed-By: /etc/apt/keyrings/nvidia-cuda.asc",
    ]
    key = host.file("/etc/apt/keyrings/nvidia-cuda.asc")
    assert key.content_string.startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    assert key.mode == 0o644


def test_apt_reads_the_repository_and_the_hold_without_complaint(host):
    # apt parses every sources and preferences file here; a malformed record is an E: or W: line.
    policy = host.run("apt-cache policy")
    assert policy.rc == 0, policy.stderr
    assert "nvidia" not in policy.stderr
    # What `apt-get update` would fetch, without fetching it (NVIDIA cannot be reached here).
    uris = [line.split()[0].strip("'") for line in host.check_output("apt-get update --print-uris").splitlines()]
    distro, _watts, _params = expected(host)
    assert NVIDIA_REPO.format(distro=distro, arch=nvidia_arch(host)) + "InRelease" in uris


def test_the_driver_is_held_on_branch_580(host):
    pref = host.file("/etc/apt/preferences.d/nvidia-driver-branch.pref")
    records = [line for line in pref.content_string.splitlines() if line and not line.startswith("#")]
    assert records == [
        "Package: src:*nvidia*:any src:cuda-drivers:any src:cuda-compat:any",
        "Pin: version 580.*",
        "Pin-Priority: 1000",
    ]


def test_nouveau_is_blacklisted(host):
    blacklist = host.file("/etc/modprobe.d/blacklist-nouveau.conf")
    assert blacklist.mode == 0o644
    assert [line for line in blacklist.content_string.splitlines() if not line.startswith("#")] == [
        "blacklist nouveau",
        "options nouveau modeset=0",
    ]


def test_hmm_off_in_nvidia_uvm_only_where_asked(host):
    option = host.file("/etc/modprobe.d/nvidia-uvm-disable-hmm.conf")
    if expected(host)[2] is None:
        assert not option.exists
    else:
        assert option.mode == 0o644
        assert [line for line in option.content_string.splitlines() if not line.startswith("#")] == [
            "options nvidia_uvm uvm_disable_hmm=1"]


def test_the_rollback_knows_the_host_had_neither_file(host):
    kept = host.file("/var/lib/sm120-sglang/gpu_driver-originals")
    assert kept.is_directory and kept.mode == 0o700
    assert sorted(kept.listdir()) == ["90-sm120-gpu-driver.cfg.absent", "nvidia-uvm-disable-hmm.conf.absent"]


def test_kernel_parameters_only_where_asked(host):
    _distro, _watts, params = expected(host)
    dropin = host.file("/etc/default/grub.d/90-sm120-gpu-driver.cfg")
    if params is None:
        assert not dropin.exists
    else:
        assert 'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX} %s"' % params in dropin.content_string.splitlines()
        # The line is shell, as GRUB sources it: it adds to what /etc/default/grub set.
        out = host.check_output("GRUB_CMDLINE_LINUX=quiet; . %s; echo \"$GRUB_CMDLINE_LINUX\"" % dropin.path)
        assert out == "quiet " + params


def test_the_power_limit_unit_is_enabled_and_set_every_gpu_at_boot(host):
    _distro, watts, _params = expected(host)
    unit = host.service("nvidia-power-limit.service")
    assert unit.is_enabled
    assert unit.is_running  # systemctl is-active: a oneshot that stays active after its ExecStart lines ran
    exec_start = host.file("/etc/systemd/system/nvidia-power-limit.service").content_string
    lines = [line for line in exec_start.splitlines() if line.startswith("ExecStart=")]
    assert len(lines) == GPU_COUNT
    for line in lines:
        assert line.startswith("ExecStart=/usr/bin/nvidia-smi -i GPU-")
        assert line.endswith(" -pl " + watts)
    # systemd has loaded that unit, not an older copy.
    shown = host.check_output("systemctl show -p ExecStart nvidia-power-limit.service")
    assert shown.count(" -pl %s " % watts) == GPU_COUNT, shown


def test_the_limit_is_in_force_on_every_gpu(host):
    _distro, watts, _params = expected(host)
    limits = host.check_output("nvidia-smi --query-gpu=index,power.limit --format=csv,noheader,nounits").splitlines()
    assert [line.split(", ")[1] for line in limits] == ["%s.00" % watts] * GPU_COUNT


def test_nvidia_persistenced_is_enabled_and_honestly_not_running(host):
    # The driver packages are not installed in these containers: the unit is
    # enabled, and its condition keeps it from claiming to run.
    assert not host.file("/usr/bin/nvidia-persistenced").exists
    unit = host.service("nvidia-persistenced.service")
    assert unit.is_enabled
    assert not unit.is_running
    shown = dict(line.split("=", 1) for line in host.check_output(
        "systemctl show -p ConditionResult -p FragmentPath nvidia-persistenced.service").splitlines())
    assert shown["FragmentPath"] == "/etc/systemd/system/nvidia-persistenced.service"
    assert "ConditionPathExists=/usr/bin/nvidia-persistenced" in host.file(shown["FragmentPath"]).content_string


def test_the_phase_stamp_holds_what_the_driver_phase_wrote_as_it_is_on_the_host(host):
    # Recorded once the role ran through; the idempotence run compared against it and skipped the configuration.
    stamp = json.loads(host.file("/var/lib/sm120-sglang/phases/driver.json").content_string)
    grub = "/etc/default/grub.d/90-sm120-gpu-driver.cfg"
    owned = ["/etc/apt/keyrings/nvidia-cuda.asc", "/etc/apt/preferences.d/nvidia-driver-branch.pref",
             "/etc/apt/sources.list.d/nvidia-cuda.sources", grub, "/etc/modprobe.d/blacklist-nouveau.conf",
             "/etc/modprobe.d/nvidia-uvm-disable-hmm.conf",
             "/etc/systemd/system/nvidia-persistenced.service"]
    assert sorted(stamp["files"]) == sorted(owned)
    for path in owned:
        if expected(host)[2] is None and path in (grub, "/etc/modprobe.d/nvidia-uvm-disable-hmm.conf"):
            assert stamp["files"][path] == "absent" and not host.file(path).exists
        else:
            assert stamp["files"][path] == host.file(path).sha256sum
    assert stamp["units"] == {"nvidia-persistenced.service": "enabled/inactive"}
    assert stamp["phase"] == "driver" and len(stamp["inputs"]) == 64


def test_the_driver_packages_were_not_installed(host):
    # gpu_driver_install_packages is false here; nothing pretends otherwise.
    for package in ("nvidia-driver-cuda", "nvidia-kernel-open-dkms", "linux-headers-" + host.check_output("uname -r")):
        assert not host.package(package).is_installed


def test_the_facts_the_role_verified_are_the_stand_ins(host):
    out = host.check_output("nvidia-smi --query-gpu=index,compute_cap,driver_version --format=csv,noheader,nounits")
    rows = [line.split(", ") for line in out.splitlines()]
    assert rows == [[str(index), "12.0", "580.159.04"] for index in range(GPU_COUNT)]
