/* Trimmed from NVIDIA/open-gpu-kernel-modules 580.142 src/common/sdk/nvidia/inc/ctrl/ctrl0000/ctrl0000event.h
 * SPDX-FileCopyrightText: Copyright (c) 2006-2024 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
 * SPDX-License-Identifier: MIT */
#define NV0000_CTRL_CMD_GET_SYSTEM_EVENT_DATA (0x502) /* finn: Evaluated from "(FINN_NV01_ROOT_EVENT_INTERFACE_ID << 8) | NV0000_CTRL_GET_SYSTEM_EVENT_DATA_PARAMS_MESSAGE_ID" */

#define NV0000_CTRL_GET_SYSTEM_EVENT_DATA_PARAMS_MESSAGE_ID (0x2U)

typedef struct NV0000_CTRL_GET_SYSTEM_EVENT_DATA_PARAMS {
    NvU32 event;

    union {
        NV0000_CTRL_SYSTEM_EVENT_DATA_DISPLAY_CHANGE  display;
        NV0000_CTRL_SYSTEM_EVENT_DATA_VGPU_UNBIND     vgpuUnbind;
        NV0000_CTRL_SYSTEM_EVENT_DATA_VGPU_BIND       vgpuBind;
        NV0000_CTRL_SYSTEM_EVENT_DATA_GPU_BIND_UNBIND gpuBindUnbind;
    } data;
} NV0000_CTRL_GET_SYSTEM_EVENT_DATA_PARAMS;
