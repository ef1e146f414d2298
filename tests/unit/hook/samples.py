"""libvirt domain XML as libvirt hands it to the qemu hook.

The layout is what libvirt writes for a Nova instance (``virsh dumpxml``
of a Nova guest: the ``nova:`` metadata, ``<hostdev mode='subsystem'
type='pci' managed='yes'>`` with ``<driver name='vfio'/>``, the host
address in ``<source>``, the guest address after it), with addresses in
libvirt's own format (``domain='0x%04x' bus='0x%02x' slot='0x%02x'
function='0x%d'``, ``virPCIDeviceAddressFormat``).
"""

HEAD = """\
<domain type='kvm' id='7'>
  <name>{name}</name>
  <uuid>{uuid}</uuid>
  <metadata>
    <nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1">
      <nova:package version="29.2.0"/>
      <nova:name>train-{gpus}gpu</nova:name>
      <nova:creationTime>2025-03-04 10:21:07</nova:creationTime>
      <nova:flavor name="h100.{gpus}x">
        <nova:memory>{memory}</nova:memory>
        <nova:disk>200</nova:disk>
        <nova:swap>0</nova:swap>
        <nova:ephemeral>0</nova:ephemeral>
        <nova:vcpus>{vcpus}</nova:vcpus>
      </nova:flavor>
      <nova:owner>
        <nova:user uuid="5b4f6a0e2d7c4f0f8f2e1d9b7a6c5e4d">alice</nova:user>
        <nova:project uuid="9f8e7d6c5b4a4b3c8d2e1f0a9b8c7d6e">ml</nova:project>
      </nova:owner>
    </nova:instance>
  </metadata>
  <memory unit='KiB'>{memory_kib}</memory>
  <currentMemory unit='KiB'>{memory_kib}</currentMemory>
  <vcpu placement='static'>{vcpus}</vcpu>
  <sysinfo type='smbios'>
    <system>
      <entry name='manufacturer'>OpenStack Foundation</entry>
      <entry name='product'>OpenStack Nova</entry>
      <entry name='uuid'>{uuid}</entry>
      <entry name='family'>Virtual Machine</entry>
    </system>
  </sysinfo>
  <os>
    <type arch='x86_64' machine='pc-q35-8.2'>hvm</type>
    <boot dev='hd'/>
    <smbios mode='sysinfo'/>
  </os>
  <features>
    <acpi/>
    <apic/>
  </features>
  <cpu mode='host-passthrough' check='none' migratable='on'>
    <topology sockets='{vcpus}' dies='1' cores='1' threads='1'/>
  </cpu>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2' cache='none'/>
      <source file='/var/lib/nova/instances/{uuid}/disk'/>
      <target dev='vda' bus='virtio'/>
      <address type='pci' domain='0x0000' bus='0x03' slot='0x00' \
function='0x0'/>
    </disk>
    <controller type='pci' index='0' model='pcie-root'/>
    <controller type='pci' index='1' model='pcie-root-port'>
      <model name='pcie-root-port'/>
      <target chassis='1' port='0x10'/>
      <address type='pci' domain='0x0000' bus='0x00' slot='0x02' \
function='0x0' multifunction='on'/>
    </controller>
    <interface type='bridge'>
      <mac address='fa:16:3e:4c:2a:91'/>
      <source bridge='br-int'/>
      <virtualport type='openvswitch'>
        <parameters interfaceid='1f0e6a3c-8d44-4a8e-b0a4-6b0f7d2c9e11'/>
      </virtualport>
      <target dev='tap1f0e6a3c-8d'/>
      <model type='virtio'/>
      <mtu size='8942'/>
      <address type='pci' domain='0x0000' bus='0x01' slot='0x00' \
function='0x0'/>
    </interface>
    <serial type='pty'>
      <log file='/var/lib/nova/instances/{uuid}/console.log' append='off'/>
      <target type='isa-serial' port='0'>
        <model name='isa-serial'/>
      </target>
    </serial>
    <input type='tablet' bus='usb'/>
    <graphics type='vnc' port='-1' autoport='yes' listen='0.0.0.0'/>
    <video>
      <model type='virtio' heads='1' primary='yes'/>
    </video>
"""

GPU = """\
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <driver name='vfio'/>
      <source>
        <address domain='0x0000' bus='0x{bus}' slot='0x00' function='0x0'/>
      </source>
      <address type='pci' domain='0x0000' bus='0x{guest_bus:02x}' \
slot='0x00' function='0x0'/>
    </hostdev>
"""

# An InfiniBand VF given as a plain PCI hostdev (not an NVIDIA GPU).
NIC_HOSTDEV = """\
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <driver name='vfio'/>
      <source>
        <address domain='0x0000' bus='0x0c' slot='0x00' function='0x0'/>
      </source>
      <address type='pci' domain='0x0000' bus='0x0a' slot='0x00' \
function='0x0'/>
    </hostdev>
"""

# An SR-IOV port as Neutron/Nova write it: an interface, not a hostdev.
SRIOV_INTERFACE = """\
    <interface type='hostdev' managed='yes'>
      <mac address='fa:16:3e:11:22:33'/>
      <driver name='vfio'/>
      <source>
        <address type='pci' domain='0x0000' bus='0x0c' slot='0x00' \
function='0x2'/>
      </source>
      <vlan>
        <tag id='1042'/>
      </vlan>
      <address type='pci' domain='0x0000' bus='0x0b' slot='0x00' \
function='0x0'/>
    </interface>
"""

MDEV = """\
    <hostdev mode='subsystem' type='mdev' managed='no' model='vfio-pci' \
display='off'>
      <source>
        <address uuid='aa618089-8b16-4d01-a136-25a0f3c73123'/>
      </source>
      <address type='pci' domain='0x0000' bus='0x06' slot='0x00' \
function='0x0'/>
    </hostdev>
"""

USB = """\
    <hostdev mode='subsystem' type='usb' managed='no'>
      <source>
        <vendor id='0x0781'/>
        <product id='0x5567'/>
      </source>
    </hostdev>
"""

TAIL = """\
    <memballoon model='virtio'>
      <stats period='10'/>
      <address type='pci' domain='0x0000' bus='0x05' slot='0x00' \
function='0x0'/>
    </memballoon>
    <rng model='virtio'>
      <backend model='random'>/dev/urandom</backend>
      <address type='pci' domain='0x0000' bus='0x07' slot='0x00' \
function='0x0'/>
    </rng>
  </devices>
</domain>
"""

UUID = '0d3f3c57-2b8e-4a4c-9d0e-5f6a7b8c9d01'


def domain_xml(gpus=(), extra='', name='instance-0000002a', uuid=UUID):
    """A Nova guest's XML passing through ``gpus`` (host addresses).

    :param gpus: ``dddd:bb:dd.f`` addresses on domain 0, function 0.
    :param extra: more device XML, placed after the GPUs.
    """
    count = len(gpus)
    text = HEAD.format(name=name, uuid=uuid, gpus=count or 0,
                       memory=count * 131072 or 8192,
                       memory_kib=(count * 131072 or 8192) * 1024,
                       vcpus=count * 16 or 4)
    for index, address in enumerate(gpus):
        text += GPU.format(bus=address.split(':')[1],
                           guest_bus=0x10 + index)
    return text + extra + TAIL
