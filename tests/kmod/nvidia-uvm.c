// SPDX-License-Identifier: MIT
/*
 * Test fixture, not a driver. A stand-in for NVIDIA's nvidia-uvm.ko for
 * nvprobe's VM test tier: it registers "nvidia-uvm" (dynamic major, minors
 * 0 and 1) and carries the real names and prototypes of the UVM functions
 * nvprobe hooks (open kernel modules 580.159.04, uvm.c, uvm_va_space.c,
 * uvm_gpu.c, uvm_pmm_gpu.c, uvm_hmm.c), in the real call order:
 *   UVM_INITIALIZE   -> uvm_va_space_create -> uvm_va_space_mm_register
 *                       (-> the kernel's mmu_notifier_register, as the real
 *                       module does when pageable memory access is on; the
 *                       stand-in unregisters at once: it keeps no per-mm
 *                       state) -> uvm_hmm_va_space_initialize
 *   UVM_REGISTER_GPU -> uvm_api_register_gpu -> uvm_va_space_register_gpu
 *                    -> uvm_gpu_retain_by_uuid -> uvm_pmm_devmem_init (HMM)
 * It answers with rmStatus written into the parameters, as UVM does.
 *
 * Module parameters inject the failures the tests need (NV_STATUS values):
 *   init_status       UVM_INITIALIZE's rmStatus
 *   hmm_status        uvm_pmm_devmem_init's result (the HMM device-private
 *                     memory set-up on the first GPU registration), after
 *   hmm_delay_ms      milliseconds spent in it
 *   block_register=1  UVM_REGISTER_GPU sleeps in uvm_gpu_retain_by_uuid
 *                     until the caller is signalled
 * and carries the real module's uvm_disable_hmm parameter (read by
 * nvprobe; the stand-in's HMM path runs either way).
 */
#include <linux/cdev.h>
#include <linux/delay.h>
#include <linux/fs.h>
#include <linux/mmu_notifier.h>
#include <linux/sched/mm.h>
#include <linux/module.h>
#include <linux/sched/signal.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

MODULE_LICENSE("Dual MIT/GPL");
MODULE_DESCRIPTION("nvprobe test fixture: stand-in for nvidia-uvm.ko");

typedef u32 NvU32;
typedef s32 NvS32;
typedef u64 NvU64;
typedef u8 NvBool;
typedef NvU32 NV_STATUS;
typedef struct { u8 uuid[16]; } NvProcessorUuid;
typedef struct uvm_va_space_struct { int registered; } uvm_va_space_t;
typedef struct uvm_parent_gpu_struct { int id; } uvm_parent_gpu_t;
typedef struct uvm_gpu_struct { uvm_parent_gpu_t *parent; } uvm_gpu_t;
typedef struct { u32 rm_control_fd; u32 user_client; u32 user_object; } uvm_rm_user_object_t;
typedef struct uvm_test_parent_gpu_inject_error_struct { int unused; } uvm_test_parent_gpu_inject_error_t;
typedef struct {
	NvProcessorUuid gpu_uuid; /* 0 */
	NvBool numaEnabled;       /* 16 */
	NvS32 numaNodeId;         /* 20 */
	NvS32 rmCtrlFd;           /* 24 */
	NvU32 hClient;            /* 28 */
	NvU32 hSmcPartRef;        /* 32 */
	NV_STATUS rmStatus;       /* 36 */
} UVM_REGISTER_GPU_PARAMS;

#define NV_OK 0x0
#define NV_ERR_NOT_SUPPORTED 0x56
#define NV_ERR_OPERATING_SYSTEM 0x63
#define UVM_INITIALIZE 0x30000001
#define UVM_DEINITIALIZE 0x30000002
#define UVM_REGISTER_GPU 37
#define UVM_PAGEABLE_MEM_ACCESS 39
#define UVM_MM_INITIALIZE 75

static uint init_status;
module_param(init_status, uint, 0444);
static uint hmm_status;
module_param(hmm_status, uint, 0444);
static uint hmm_delay_ms;
module_param(hmm_delay_ms, uint, 0444);
static uint block_register;
module_param(block_register, uint, 0444);
/* As in the real module (uvm_hmm.c): readable in /sys/module/nvidia_uvm/parameters. */
static bool uvm_disable_hmm;
module_param(uvm_disable_hmm, bool, 0444);

static DECLARE_WAIT_QUEUE_HEAD(never);
static dev_t uvm_base;
static struct cdev uvm_cdev;
static uvm_va_space_t the_va_space;
static uvm_parent_gpu_t the_parent = { .id = 1 };
static uvm_gpu_t the_gpu = { .parent = &the_parent };

noinline void uvm_hmm_va_space_initialize(uvm_va_space_t *va_space)
{
	va_space->registered = 0;
}

static const struct mmu_notifier_ops uvm_mmu_ops;

noinline NV_STATUS uvm_va_space_mm_register(uvm_va_space_t *va_space)
{
	struct mmu_notifier mn = { .ops = &uvm_mmu_ops };
	struct mm_struct *mm = current->mm;
	if (!mm)
		return NV_OK;
	if (mmu_notifier_register(&mn, mm))
		return NV_ERR_OPERATING_SYSTEM;
	mmu_notifier_unregister(&mn, mm);
	return NV_OK;
}

noinline NV_STATUS uvm_va_space_create(struct address_space *mapping, uvm_va_space_t **va_space_ptr, NvU64 flags)
{
	NV_STATUS st;
	if (init_status)
		return init_status;
	st = uvm_va_space_mm_register(&the_va_space);
	if (st != NV_OK)
		return st;
	uvm_hmm_va_space_initialize(&the_va_space);
	*va_space_ptr = &the_va_space;
	return NV_OK;
}

noinline NV_STATUS uvm_pmm_devmem_init(uvm_parent_gpu_t *gpu)
{
	if (hmm_delay_ms)
		msleep(hmm_delay_ms);
	return hmm_status;
}

noinline NV_STATUS uvm_gpu_retain_by_uuid(const NvProcessorUuid *gpu_uuid,
                                          const uvm_rm_user_object_t *user_rm_device,
                                          const uvm_test_parent_gpu_inject_error_t *parent_gpu_error,
                                          uvm_gpu_t **gpu_out)
{
	NV_STATUS st;
	if (block_register && wait_event_interruptible(never, false))
		return NV_ERR_OPERATING_SYSTEM;
	st = uvm_pmm_devmem_init(the_gpu.parent);
	if (st != NV_OK)
		return st;
	*gpu_out = &the_gpu;
	return NV_OK;
}

noinline NV_STATUS uvm_va_space_register_gpu(uvm_va_space_t *va_space, const NvProcessorUuid *gpu_uuid,
                                             const uvm_rm_user_object_t *user_rm_device, NvBool *numa_enabled,
                                             NvS32 *numa_node_id, NvProcessorUuid *uuid_out)
{
	uvm_gpu_t *gpu;
	NV_STATUS st = uvm_gpu_retain_by_uuid(gpu_uuid, user_rm_device, NULL, &gpu);
	if (st != NV_OK)
		return st;
	*numa_enabled = 0;
	*numa_node_id = -1;
	*uuid_out = *gpu_uuid;
	va_space->registered = 1;
	return NV_OK;
}

noinline NV_STATUS uvm_api_register_gpu(UVM_REGISTER_GPU_PARAMS *params, struct file *filp)
{
	uvm_rm_user_object_t dev = { params->rmCtrlFd, params->hClient, params->hSmcPartRef };
	NvBool numa;
	NvS32 node;
	NvProcessorUuid out;
	return uvm_va_space_register_gpu(&the_va_space, &params->gpu_uuid, &dev, &numa, &node, &out);
}

static long status_only(unsigned long arg, size_t size, size_t off, NV_STATUS st)
{
	u8 buf[64];
	if (size > sizeof(buf) || copy_from_user(buf, (void __user *)arg, size))
		return -EFAULT;
	memcpy(buf + off, &st, 4);
	return copy_to_user((void __user *)arg, buf, size) ? -EFAULT : 0;
}

static noinline long uvm_unlocked_ioctl_entry(struct file *filp, unsigned int cmd, unsigned long arg)
{
	switch (cmd) {
	case UVM_INITIALIZE: {
		uvm_va_space_t *vs;
		return status_only(arg, 16, 8, uvm_va_space_create(filp->f_mapping, &vs, 0));
	}
	case UVM_DEINITIALIZE:
		return 0;
	case UVM_MM_INITIALIZE:
		return status_only(arg, 8, 4, NV_OK);
	case UVM_PAGEABLE_MEM_ACCESS:
		return status_only(arg, 8, 4, NV_OK);
	case UVM_REGISTER_GPU: {
		UVM_REGISTER_GPU_PARAMS p;
		if (copy_from_user(&p, (void __user *)arg, sizeof(p)))
			return -EFAULT;
		p.rmStatus = uvm_api_register_gpu(&p, filp);
		return copy_to_user((void __user *)arg, &p, sizeof(p)) ? -EFAULT : 0;
	}
	default:
		return -EINVAL;
	}
}

static const struct file_operations uvm_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = uvm_unlocked_ioctl_entry,
	.compat_ioctl = uvm_unlocked_ioctl_entry,
};

static int __init uvm_standin_init(void)
{
	int err = alloc_chrdev_region(&uvm_base, 0, 2, "nvidia-uvm");
	if (err)
		return err;
	cdev_init(&uvm_cdev, &uvm_fops);
	err = cdev_add(&uvm_cdev, uvm_base, 2);
	if (err)
		unregister_chrdev_region(uvm_base, 2);
	return err;
}

static void __exit uvm_standin_exit(void)
{
	cdev_del(&uvm_cdev);
	unregister_chrdev_region(uvm_base, 2);
}

module_init(uvm_standin_init);
module_exit(uvm_standin_exit);
