/* Trimmed from NVIDIA/open-gpu-kernel-modules 535.261.03 src/common/sdk/nvidia/inc/rs_access.h
 * SPDX-FileCopyrightText: Copyright (c) 2019-2021 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
 * SPDX-License-Identifier: MIT */
#define RS_ACCESS_COUNT      3U
typedef NvU32 RsAccessLimb;
#define SDK_RS_ACCESS_MAX_LIMBS 1
typedef struct RS_ACCESS_MASK {
    RsAccessLimb limbs[SDK_RS_ACCESS_MAX_LIMBS];
} RS_ACCESS_MASK;
typedef struct RS_SHARE_POLICY {
    NvU32          target;
    RS_ACCESS_MASK accessMask;
    NvU16          type;                         ///< RS_SHARE_TYPE_
    NvU8           action;                        ///< RS_SHARE_ACTION_
} RS_SHARE_POLICY;
