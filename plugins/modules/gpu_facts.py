#!/usr/bin/python
# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Read the host's NVIDIA GPUs, driver and GPU topology into facts
version_added: "0.1.0"
description:
  - Reads C(nvidia-smi) and C(/proc/driver/nvidia/version) and returns what they say as facts, for the preflight phase
    and for the roles that come after it.
  - Per GPU it returns the name, compute capability, memory and power limits; for the host the driver and CUDA version,
    which kernel module flavour is loaded, and the link between every pair of GPUs from C(nvidia-smi topo -m), summed up
    as RV(ansible_facts.nvidia_topology.interconnect).
  - For GPU peer-to-peer it reads each GPU's BAR1 size, NUMA node and PCI path, the P2P read and write capability
    matrices (C(nvidia-smi topo -p2p r) and C(w)), and the host settings P2P depends on
    (RV(ansible_facts.nvidia_host_p2p)), namely the kernel command line, the IOMMU groups, ACS on the GPUs' bridges
    (C(lspci -vvv), as root), C(nvidia_uvm)'s C(uvm_disable_hmm), the driver's C(RegistryDwords) and the ASPM policy.
  - When the Python that runs the module can import C(pynvml) (nvidia-ml-py) and O(use_nvml=true), values that
    C(nvidia-smi) reports as unavailable are read through NVML instead.
  - A host without a GPU, without C(nvidia-smi), or whose driver does not answer gets the same keys with an empty
    RV(ansible_facts.nvidia_gpus) list and the reason in RV(ansible_facts.nvidia_gpu_facts_reason); the module does not
    fail there.
  - It only reads. It never changes the GPUs' settings and always returns C(changed=false).
options:
  nvidia_smi:
    description:
      - Path of the C(nvidia-smi) program.
      - By default it is looked up on the target's E(PATH) and the usual C(sbin) directories.
    type: path
  use_nvml:
    description:
      - Read through NVML (the C(pynvml) module of nvidia-ml-py) the values that C(nvidia-smi) leaves unavailable.
      - Without C(pynvml) on the target's Python this has no effect and RV(ansible_facts.nvidia_nvml_available) is
        V(false).
    type: bool
    default: true
extends_documentation_fragment:
  - sm120.sglang.attributes
  - sm120.sglang.attributes.read_only
  - sm120.sglang.attributes.facts
attributes:
  check_mode:
    description: The module only reads, so check mode runs it in full and returns the same facts.
  platform:
    description: Runs on POSIX hosts with the NVIDIA driver's user-space tools.
requirements:
  - C(nvidia-smi) from the NVIDIA driver on the target
  - optionally C(lspci) (pciutils), run as root, for ACS on the GPUs' bridges
  - optionally nvidia-ml-py (C(pynvml)) in the target's Python, see O(use_nvml)
notes:
  - A C(nvidia-smi) that answers but prints a format this module cannot read is an error, not an empty list, so that a
    driver change cannot silently hide GPUs.
seealso:
  - module: ansible.builtin.setup
author:
  # validate-modules wants a GitHub handle; the collection has no single author.
  - sm120.sglang contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read GPU facts
  sm120.sglang.gpu_facts:

- name: Stop unless every GPU is SM120
  ansible.builtin.assert:
    that:
      - nvidia_gpus | length > 0
      - nvidia_gpus | map(attribute='compute_capability') | unique == ['12.0']
    fail_msg: "{{ nvidia_gpu_facts_reason or 'not every GPU is SM120' }}"

- name: Read GPU facts with an nvidia-smi outside PATH, without NVML
  sm120.sglang.gpu_facts:
    nvidia_smi: /usr/local/nvidia/bin/nvidia-smi
    use_nvml: false

- name: Show the tensor-parallel link between GPU0 and GPU1
  ansible.builtin.debug:
    msg: "{{ nvidia_topology.interconnect }}: GPU0-GPU1 is {{ nvidia_topology.matrix.GPU0.GPU1 }}"
  when: nvidia_gpus | length > 1
"""

RETURN = r"""
ansible_facts:
  description: Facts about the host's NVIDIA driver, GPUs and GPU topology.
  returned: always
  type: dict
  contains:
    nvidia_gpu_facts_reason:
      description:
        - Why no GPU is listed, for example no C(nvidia-smi) or a driver that does not answer; V(null) when GPUs were
          read.
      returned: always
      type: str
      sample: "nvidia-smi: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that
        the latest NVIDIA driver is installed and running. (exit code 9)"
    nvidia_driver_version:
      description:
        - The driver version C(nvidia-smi) reports, else the loaded kernel module's; V(null) when neither is known.
      returned: always
      type: str
      sample: "580.159.04"
    nvidia_cuda_version:
      description:
        - The highest CUDA version the driver supports, as C(nvidia-smi) prints it; V(null) when unknown.
      returned: always
      type: str
      sample: "13.0"
    nvidia_kernel_module:
      description:
        - Which NVIDIA kernel module is loaded, from C(/proc/driver/nvidia/version). Blackwell GPUs need V(open).
        - V(null) when that file cannot be read, for example with no driver loaded or inside some containers.
      returned: always
      type: str
      choices: [open, proprietary]
      sample: open
    nvidia_nvml_available:
      description:
        - Whether the Python that ran the module could import C(pynvml) and initialise NVML.
        - V(false) with O(use_nvml=false), and when no GPU is listed, since NVML is then not asked.
      returned: always
      type: bool
      sample: true
    nvidia_gpus:
      description:
        - One entry per GPU, in C(nvidia-smi)'s order. A value neither C(nvidia-smi) nor NVML can read is V(null).
      returned: always
      type: list
      elements: dict
      contains:
        index:
          description: The GPU's index, as C(nvidia-smi) and NVML number it.
          type: int
          sample: 0
        name:
          description: The product name.
          type: str
          sample: NVIDIA RTX PRO 6000 Blackwell Server Edition
        uuid:
          description: The GPU's UUID.
          type: str
          sample: GPU-9c1e6f04-3b7a-4d52-8e19-2f60a8d4c711
        pci_bus_id:
          description: The PCI bus id, C(domain:bus:device.function).
          type: str
          sample: "00000000:17:00.0"
        compute_capability:
          description: The CUDA compute capability, C(major.minor); V(12.0) is SM120.
          type: str
          sample: "12.0"
        memory_total_mib:
          description: Total GPU memory in MiB.
          type: int
          sample: 97887
        memory_used_mib:
          description: GPU memory in use in MiB when the facts were read.
          type: int
          sample: 0
        power_draw_w:
          description: Power draw in watts when the facts were read.
          type: float
          sample: 34.55
        power_limit_w:
          description: The power limit in force, in watts.
          type: float
          sample: 600.0
        power_default_limit_w:
          description: The board's default power limit in watts.
          type: float
          sample: 600.0
        power_min_limit_w:
          description: The lowest power limit the board accepts, in watts.
          type: float
          sample: 150.0
        power_max_limit_w:
          description: The highest power limit the board accepts, in watts.
          type: float
          sample: 600.0
        persistence_mode:
          description: Whether persistence mode is on.
          type: bool
          sample: true
        bar1_total_mib:
          description:
            - The GPU's BAR1 aperture in MiB, from C(nvidia-smi -q -d MEMORY). About 96 GiB (V(98304)) with Above 4G
              decoding and Resizable BAR on in the BIOS; V(256) without.
            - V(null) when C(nvidia-smi) did not say.
          type: int
          sample: 98304
        numa_node:
          description: The NUMA node close to the GPU, from C(nvidia-smi topo -m); V(null) when N/A or unknown.
          type: int
          sample: 0
        pcie_path:
          description:
            - The PCI addresses from the GPU's root port down to the GPU itself (root port, switch ports, GPU), from the
              device's path under C(/sys/devices). Empty when it could not be read.
          type: list
          elements: str
          sample: ["0000:20:01.1", "0000:21:00.0", "0000:22:00.0", "0000:23:00.0"]
    nvidia_topology:
      description: How the GPUs are linked, from C(nvidia-smi topo -m).
      returned: always
      type: dict
      contains:
        interconnect:
          description:
            - V(single) for one GPU; V(nvlink) when every pair of GPUs is linked by NVLink (C(NV#)), V(pcie) when
              none is, V(mixed) otherwise.
            - V(null) when there is no GPU, or several whose links could not be read.
          type: str
          choices: [single, nvlink, pcie, mixed]
          sample: pcie
        matrix:
          description:
            - For each GPU, its link type to every other GPU as C(nvidia-smi topo -m) prints it, one of C(NV#),
              C(PIX), C(PXB), C(PHB), C(NODE), C(SYS). Keys are C(nvidia-smi)'s labels, C(GPU<index>).
            - NIC rows and columns are left out.
          type: dict
          sample: {"GPU0": {"GPU1": "PIX"}, "GPU1": {"GPU0": "PIX"}}
        affinity:
          description:
            - For each GPU (C(GPU<index>)), the CPUs and NUMA node close to it. A value C(nvidia-smi) prints as
              C(N/A) is V(null).
          type: dict
          sample: {"GPU0": {"cpu_affinity": "0-47,96-143", "numa_affinity": "0", "gpu_numa_id": null}}
          contains:
            cpu_affinity:
              description: The CPUs close to the GPU, as a CPU list.
              type: str
              sample: "0-47,96-143"
            numa_affinity:
              description: The NUMA node(s) close to the GPU.
              type: str
              sample: "0"
            gpu_numa_id:
              description: The GPU's own NUMA node id, only set on systems where GPU memory is a NUMA node.
              type: str
              sample: null
        p2p_read:
          description:
            - For each GPU, C(nvidia-smi topo -p2p r)'s P2P read capability to every other GPU, its legend's code
              (C(OK), C(CNS) chipset not supported, C(GNS), C(TNS), C(NS), C(DR) disabled by regkey, C(U) unknown).
            - Empty for one GPU and where C(nvidia-smi) could not say (a warning says why).
          type: dict
          sample: {"GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "OK"}}
        p2p_write:
          description: As RV(ansible_facts.nvidia_topology.p2p_read), for P2P writes (C(nvidia-smi topo -p2p w)).
          type: dict
          sample: {"GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "OK"}}
    nvidia_host_p2p:
      description:
        - What the host says about the settings GPU peer-to-peer depends on. Each key is V(null) where its source could
          not be read (no GPU answered, no C(nvidia_uvm) loaded, no C(lspci), not root), which the preflight reports as
          unknown, never as met.
      returned: always
      type: dict
      contains:
        cmdline:
          description: The active kernel command line (C(/proc/cmdline)), split into its parameters.
          type: list
          elements: str
          sample: ["BOOT_IMAGE=/boot/vmlinuz", "ro", "iommu=pt", "pcie_aspm=off", "pcie_port_pm=off"]
        iommu_group_types:
          description:
            - IOMMU group number to its C(type) under C(/sys/kernel/iommu_groups); C(identity) is passthrough, C(DMA) or
              C(DMA-FQ) translation. Empty when the IOMMU is off.
          type: dict
          sample: {"0": "identity"}
        uvm_disable_hmm:
          description: C(nvidia_uvm)'s C(uvm_disable_hmm) parameter; V(true) is HMM off.
          type: bool
          sample: true
        registry_dwords:
          description: The driver's C(RegistryDwords) from C(/proc/driver/nvidia/params), name to value.
          type: dict
          sample: {"ForceP2P": "0x11"}
        aspm_policy:
          description: The PCIe ASPM policy in force (C(/sys/module/pcie_aspm/parameters/policy)).
          type: str
          sample: default
        bridges:
          description: Every PCI bridge on a GPU's path (root ports and switch ports), each once.
          type: list
          elements: str
          sample: ["0000:20:01.1", "0000:21:00.0", "0000:22:00.0"]
        acs:
          description:
            - For each of RV(ansible_facts.nvidia_host_p2p.bridges) with an Access Control Services capability, its
              C(ACSCtl) flags from C(lspci -vvv); C(ReqRedir) or C(CmpltRedir) V(true) sends P2P through the root.
            - V(null) where C(lspci) could not say (not installed, not root).
          type: dict
          sample: {"0000:20:01.1": {"SrcValid": true, "ReqRedir": false, "CmpltRedir": false}}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.sm120.sglang.plugins.module_utils.gpu_facts import (
    build_facts,
    build_topology,
    failure_reason,
    fill_missing_from_nvml,
    parse_driver_version_file,
    parse_query_gpu_csv,
    parse_smi_banner,
    parse_topology,
    query_gpu_argv,
    topology_argv,
)

from ansible_collections.sm120.sglang.plugins.module_utils import gpu_p2p

try:
    import pynvml
except ImportError:
    pynvml = None

DRIVER_VERSION_FILE = "/proc/driver/nvidia/version"


def _read_driver_version_file():
    try:
        with open(DRIVER_VERSION_FILE) as version_file:
            return version_file.read()
    except (IOError, OSError):
        return None


def _read_text(path):
    try:
        with open(path) as source:
            return source.read()
    except (IOError, OSError):
        return None


def _read_iommu_group_types():
    # The text `grep . /sys/kernel/iommu_groups/*/type` prints, so that the parser reads captures and the host alike.
    try:
        groups = sorted(os.listdir(gpu_p2p.IOMMU_GROUPS), key=lambda name: int(name) if name.isdigit() else -1)
    except (IOError, OSError):
        return None
    lines = []
    for group in groups:
        kind = _read_text(os.path.join(gpu_p2p.IOMMU_GROUPS, group, "type"))
        path = os.path.join(gpu_p2p.IOMMU_GROUPS, group)
        lines.append(path if kind is None else "%s/type:%s" % (path, kind.strip()))
    return "\n".join(lines)


def _read_pci_path(bus_id):
    try:
        path = os.path.join(gpu_p2p.PCI_DEVICES, gpu_p2p.normalize_bdf(bus_id))
    except ValueError:
        return []
    return gpu_p2p.parse_pci_path(os.path.realpath(path)) if os.path.exists(path) else []


def _optional_smi(module, argv, parse, what):
    """The parsed output of an nvidia-smi call older drivers or stand-ins may not answer; None with a warning then."""
    rc, stdout, stderr = module.run_command(argv)
    if rc != 0:
        module.warn("%s unknown: %s" % (what, failure_reason(" ".join(argv[1:]), rc, stdout, stderr)))
        return None
    return _parse_or_fail(module, parse, argv, stdout)


def _lspci_acs(module):
    lspci = module.get_bin_path("lspci")
    if lspci is None:
        module.warn("ACS on the GPUs' bridges unknown: lspci not found (install pciutils)")
        return None
    rc, stdout, stderr = module.run_command([lspci, "-vvv"])
    if rc != 0:
        module.warn("ACS on the GPUs' bridges unknown: %s" % failure_reason("lspci -vvv", rc, stdout, stderr))
        return None
    if "Capabilities:" not in stdout and stdout.strip():
        # lspci shows no capabilities to a user who is not root: an ACS it cannot see is not an ACS that is off.
        module.warn("ACS on the GPUs' bridges unknown: lspci -vvv shows no capabilities (run as root)")
        return None
    return gpu_p2p.parse_lspci_acs(stdout)


def gather_p2p(module, nvidia_smi, gpus, topology):
    """Per GPU BAR1, NUMA node and PCI path; the P2P matrices into the topology; the host's P2P settings."""
    bar1 = _optional_smi(module, gpu_p2p.memory_argv(nvidia_smi), gpu_p2p.parse_bar1_total, "BAR1 size") or {}
    for gpu in gpus:
        bus_id = gpu.get("pci_bus_id")
        try:
            gpu["bar1_total_mib"] = bar1.get(gpu_p2p.normalize_bdf(bus_id))
        except ValueError:
            gpu["bar1_total_mib"] = None
        gpu["numa_node"] = gpu_p2p.numa_node(topology["affinity"], gpu.get("index"))
        gpu["pcie_path"] = _read_pci_path(bus_id) if bus_id else []
    for capability, key in (("r", "p2p_read"), ("w", "p2p_write")):
        if len(gpus) < 2:
            topology[key] = {}
            continue
        matrix = _optional_smi(module, gpu_p2p.p2p_argv(nvidia_smi, capability), gpu_p2p.parse_p2p_matrix,
                               "P2P %s capability" % ("read" if capability == "r" else "write"))
        topology[key] = matrix if matrix is not None else {}
    bridges = gpu_p2p.gpu_bridges(gpus)
    try:
        uvm_disable_hmm = gpu_p2p.parse_module_bool(_read_text(gpu_p2p.UVM_DISABLE_HMM))
    except ValueError as exc:
        module.warn("uvm_disable_hmm unknown: %s" % to_native(exc))
        uvm_disable_hmm = None
    return gpu_p2p.build_host_p2p(
        cmdline=gpu_p2p.parse_cmdline(_read_text(gpu_p2p.PROC_CMDLINE)),
        iommu_group_types=gpu_p2p.parse_iommu_group_types(_read_iommu_group_types()),
        uvm_disable_hmm=uvm_disable_hmm,
        nvidia_params=gpu_p2p.parse_nvidia_params(_read_text(gpu_p2p.NVIDIA_PARAMS)),
        aspm_policy=gpu_p2p.parse_aspm_policy(_read_text(gpu_p2p.ASPM_POLICY)),
        acs=_lspci_acs(module) if bridges else None,
        bridges=bridges,
    )


def _find_nvidia_smi(module):
    path = module.params["nvidia_smi"]
    if path is None:
        return module.get_bin_path("nvidia-smi"), "nvidia-smi not found on PATH"
    if os.access(path, os.X_OK):
        return path, None
    return None, "nvidia-smi not found at %s" % path


def _parse_or_fail(module, parse, argv, stdout):
    try:
        return parse(stdout)
    except ValueError as exc:
        module.fail_json(msg="cannot read the output of %s: %s" % (" ".join(argv), to_native(exc)), cmd=argv, stdout=stdout)


def gather(module):
    kernel_module, kernel_driver_version = parse_driver_version_file(_read_driver_version_file())
    host = dict(driver_version=kernel_driver_version, kernel_module=kernel_module)

    nvidia_smi, not_found = _find_nvidia_smi(module)
    if nvidia_smi is None:
        return build_facts(reason=not_found, **host)

    # Plain nvidia-smi is the one call that prints the CUDA version; it also fails first when the driver is not loaded.
    rc, stdout, stderr = module.run_command([nvidia_smi])
    if rc != 0:
        return build_facts(reason=failure_reason("nvidia-smi", rc, stdout, stderr), **host)
    driver_version, cuda_version = parse_smi_banner(stdout)
    host.update(driver_version=driver_version or kernel_driver_version, cuda_version=cuda_version)

    argv = query_gpu_argv(nvidia_smi)
    rc, stdout, stderr = module.run_command(argv)
    if rc != 0:
        return build_facts(reason=failure_reason("nvidia-smi --query-gpu", rc, stdout, stderr), **host)
    gpus = _parse_or_fail(module, parse_query_gpu_csv, argv, stdout)
    if not gpus:
        return build_facts(reason="nvidia-smi lists no GPU", **host)

    nvml_available = False
    if module.params["use_nvml"] and pynvml is not None:
        gpus, nvml_available = fill_missing_from_nvml(pynvml, gpus)

    argv = topology_argv(nvidia_smi)
    rc, stdout, stderr = module.run_command(argv)
    if rc == 0:
        topology = build_topology(len(gpus), _parse_or_fail(module, parse_topology, argv, stdout))
    else:
        module.warn("GPU links unknown: %s" % failure_reason("nvidia-smi topo -m", rc, stdout, stderr))
        topology = build_topology(len(gpus))

    host_p2p = gather_p2p(module, nvidia_smi, gpus, topology)
    return build_facts(gpus=gpus, topology=topology, nvml_available=nvml_available, host_p2p=host_p2p, **host)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi=dict(type="path"),
            use_nvml=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    module.exit_json(changed=False, ansible_facts=gather(module))


if __name__ == "__main__":
    main()
