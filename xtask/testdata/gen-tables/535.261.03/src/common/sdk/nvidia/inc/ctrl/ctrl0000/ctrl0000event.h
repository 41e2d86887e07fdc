/* Trimmed from NVIDIA/open-gpu-kernel-modules 535.261.03 src/common/sdk/nvidia/inc/ctrl/ctrl0000/ctrl0000event.h
 * SPDX-FileCopyrightText: Copyright (c) 2006-2015 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
 * SPDX-License-Identifier: MIT */
#define NV0000_CTRL_CMD_GET_SYSTEM_EVENT_STATUS           (0x502) /* finn: Evaluated from "(FINN_NV01_ROOT_EVENT_INTERFACE_ID << 8) | NV0000_CTRL_GET_SYSTEM_EVENT_STATUS_PARAMS_MESSAGE_ID" */

#define NV0000_CTRL_GET_SYSTEM_EVENT_STATUS_PARAMS_MESSAGE_ID (0x2U)

typedef struct NV0000_CTRL_GET_SYSTEM_EVENT_STATUS_PARAMS {
    NvU32 event;
    NvU32 status;
} NV0000_CTRL_GET_SYSTEM_EVENT_STATUS_PARAMS;
