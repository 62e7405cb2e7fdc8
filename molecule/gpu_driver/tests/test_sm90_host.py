"""The SM90 host only ran the role's verify, which refused it: nothing was written there."""

testinfra_hosts = ["ansible://sm90_hosts"]


def test_the_stand_in_reports_one_sm90_gpu(host):
    out = host.check_output("nvidia-smi --query-gpu=index,name,compute_cap --format=csv,noheader,nounits")
    assert out.splitlines() == ["0, NVIDIA H200, 9.0"]


def test_verify_changed_nothing(host):
    for path in (
        "/etc/apt/sources.list.d/nvidia-cuda.sources",
        "/etc/apt/preferences.d/nvidia-driver-branch.pref",
        "/etc/modprobe.d/blacklist-nouveau.conf",
        "/etc/systemd/system/nvidia-power-limit.service",
        "/etc/systemd/system/nvidia-persistenced.service",
    ):
        assert not host.file(path).exists, path
