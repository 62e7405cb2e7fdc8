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

    return build_facts(gpus=gpus, topology=topology, nvml_available=nvml_available, **host)


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
