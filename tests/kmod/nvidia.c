// SPDX-License-Identifier: MIT
/*
 * Test fixture, not a driver. A stand-in for NVIDIA's nvidia.ko for
 * nvprobe's VM test tier (`cargo xtask vm-test`): it registers the real
 * device numbers (char major 195: minors 0..247 GPUs, 255 nvidiactl) and
 * carries the real names and prototypes of the functions nvprobe hooks
 * (open kernel modules 580.159.04, nv.c; checked against the H200's module
 * BTF by tests), so that kprobes attach by name and see the arguments where
 * the real driver has them. It answers a few escapes the way the driver
 * does (ret 0, NV_STATUS written into the parameters).
 *
 * Module parameters inject what the tests need:
 *   block_control=N   an NV_ESC_RM_CONTROL with cmd N sleeps in rm_ioctl
 *                     until the caller is signalled (a stall)
 *   adapter_delay_ms  rm_init_adapter takes this long (cold GPU start)
 */
#include <linux/cdev.h>
#include <linux/delay.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

MODULE_LICENSE("Dual MIT/GPL");
MODULE_DESCRIPTION("nvprobe test fixture: stand-in for nvidia.ko");

typedef u32 NvU32;
typedef u8 NvBool;
typedef NvU32 NV_STATUS;
typedef struct nvidia_stack_s nvidia_stack_t;
typedef struct nv_state_s nv_state_t;
typedef struct nv_file_private_s nv_file_private_t;

#define NV_OK 0x0
#define NV_ERR_INVALID_COMMAND 0x24
#define NV_ERR_INVALID_CLASS 0x22
#define NV_ERR_OPERATING_SYSTEM 0x63
#define NV_ESC_RM_CONTROL 0x2a
#define NV_ESC_RM_ALLOC 0x2b
#define NV_ESC_REGISTER_FD 0xc9

static uint block_control;
module_param(block_control, uint, 0444);
static uint adapter_delay_ms;
module_param(adapter_delay_ms, uint, 0444);

static DECLARE_WAIT_QUEUE_HEAD(never);
static struct cdev nv_cdev;
static atomic_t clients = ATOMIC_INIT(0);
static bool adapter_up;
static DEFINE_MUTEX(adapter_lock);

static void put32(void *p, size_t off, u32 v) { memcpy((u8 *)p + off, &v, 4); }
static u32 get32(const void *p, size_t off) { u32 v; memcpy(&v, (const u8 *)p + off, 4); return v; }

/* rm_ioctl: the RM entry point; pData is the kernel copy of the params. */
noinline NV_STATUS rm_ioctl(nvidia_stack_t *sp, nv_state_t *pNv, nv_file_private_t *nvfp,
                            NvU32 Command, void *pData, NvU32 dataSize)
{
	if (Command == NV_ESC_RM_CONTROL && dataSize == 32) {
		u32 cmd = get32(pData, 8);
		u32 st = NV_OK;
		if (block_control && cmd == block_control) {
			/* Sleeps until a signal comes: what a stuck call looks like. */
			if (wait_event_interruptible(never, false))
				st = NV_ERR_OPERATING_SYSTEM;
		} else if (cmd != 0x101 && cmd != 0x214 && cmd != 0x215) {
			st = NV_ERR_INVALID_COMMAND;
		}
		put32(pData, 28, st);
		return NV_OK;
	}
	if (Command == NV_ESC_REGISTER_FD && dataSize == 4)
		return NV_OK;
	if (Command == NV_ESC_RM_ALLOC && (dataSize == 32 || dataSize == 48)) {
		u32 class = get32(pData, 12);
		if (class == 0 || class == 1) {
			class = 0x41;
			put32(pData, 12, class);
		}
		if (class == 0x41 && get32(pData, 8) == 0)
			put32(pData, 8, 0xC1D00000u | (u32)atomic_inc_return(&clients));
		put32(pData, dataSize == 32 ? 28 : 40,
		      (class == 0x41 || class == 0x80 || class == 0x2080) ? NV_OK : NV_ERR_INVALID_CLASS);
		return NV_OK;
	}
	return NV_ERR_INVALID_COMMAND;
}

/* GPU bring-up on the first open of a GPU node. */
noinline NvBool rm_init_adapter(nvidia_stack_t *sp, nv_state_t *pNv)
{
	if (adapter_delay_ms)
		msleep(adapter_delay_ms);
	return 1;
}

static noinline long nvidia_unlocked_ioctl(struct file *file, unsigned int cmd, unsigned long i_arg)
{
	size_t size = _IOC_SIZE(cmd);
	void *buf;
	long ret = 0;
	NV_STATUS st;

	if (_IOC_TYPE(cmd) != 'F' || size == 0 || size > 4096)
		return -EINVAL;
	buf = kzalloc(size, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	if (copy_from_user(buf, (void __user *)i_arg, size)) {
		ret = -EFAULT;
		goto out;
	}
	st = rm_ioctl(NULL, NULL, file->private_data, _IOC_NR(cmd), buf, size);
	if (st != NV_OK) {
		ret = -EINVAL;
		goto out;
	}
	if (copy_to_user((void __user *)i_arg, buf, size))
		ret = -EFAULT;
out:
	kfree(buf);
	return ret;
}

static noinline int nvidia_open(struct inode *inode, struct file *file)
{
	if (iminor(inode) != 255) {
		mutex_lock(&adapter_lock);
		if (!adapter_up)
			adapter_up = rm_init_adapter(NULL, NULL);
		mutex_unlock(&adapter_lock);
	}
	return 0;
}

static noinline int nvidia_close(struct inode *inode, struct file *file)
{
	return 0;
}

static const struct file_operations nvidia_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = nvidia_unlocked_ioctl,
	.compat_ioctl = nvidia_unlocked_ioctl,
	.open = nvidia_open,
	.release = nvidia_close,
};

static int __init nv_standin_init(void)
{
	int err = register_chrdev_region(MKDEV(195, 0), 256, "nvidia");
	if (err)
		return err;
	cdev_init(&nv_cdev, &nvidia_fops);
	err = cdev_add(&nv_cdev, MKDEV(195, 0), 256);
	if (err)
		unregister_chrdev_region(MKDEV(195, 0), 256);
	return err;
}

static void __exit nv_standin_exit(void)
{
	cdev_del(&nv_cdev);
	unregister_chrdev_region(MKDEV(195, 0), 256);
}

module_init(nv_standin_init);
module_exit(nv_standin_exit);
