/*-------------------------------------------------------------------------
 *
 * settings.h
 *	  The extension's settings (guc.c): fencing.token, fencing.bypass and
 *	  the others.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_SETTINGS_H
#define FENCING_SETTINGS_H

#include "fence.h"

extern bool FencingBypass;
extern void FencingGucInit(void);
extern const Fence *FencingTokenSetting(void);
extern const Fence *FencingTokenSettingRaw(void);
extern bool FencingTokenSetForSession(void);

#endif							/* FENCING_SETTINGS_H */
