/*-------------------------------------------------------------------------
 *
 * provenance.h
 *	  Where a token may come from (provenance.c): the frames of what the
 *	  backend is doing (the session's own command, or code PostgreSQL runs
 *	  on its own while it handles a statement), the token each frame must
 *	  keep, and the check that no write is judged by a token that changed
 *	  where it may not.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_PROVENANCE_H
#define FENCING_PROVENANCE_H

#include "fence.h"

/* What the backend is doing, as a frame sees it */
typedef enum FencingFrameKind
{
	FENCING_FRAME_ALLOW,		/* the session's own command: SET, a routine
								 * it called by name, DO */
	FENCING_FRAME_DENY,			/* code PostgreSQL runs on its own: parsing
								 * analysis, planning, executor start and end,
								 * a reading statement, a utility command */
	FENCING_FRAME_WRITE,		/* a statement that writes */
	FENCING_FRAME_CALL			/* a call by name: its arguments are
								 * evaluated here; the bodies of its callees
								 * are ALLOW frames */
} FencingFrameKind;

/* The settings a write is judged by, as the assign hooks last set them */
typedef struct FencingTokenState
{
	bool		has_token;
	Fence		token;
	bool		bypass;
} FencingTokenState;

#define FENCING_MAX_CALLEES 8

extern int	FencingFramePush(FencingFrameKind kind, const char *phase,
							 bool eligible);
extern int	FencingFramePushCall(const char *phase, const Oid *callees, int ncallees);
extern void FencingFramePop(int depth, bool completed);
extern int	FencingFrameDepth(void);
extern bool FencingFrameEligible(void);
extern bool FencingFrameTopIs(FencingFrameKind kind);
extern bool FencingFrameCallee(Oid funcid);

extern const char *FencingChangeRefusedPhase(void);
extern void FencingSettingsAssigned(const FencingTokenState *state, bool legit);
extern void FencingCheckProvenance(void);
extern Oid	FencingForeignKeyInitiator(void);

extern void FencingMarkCallees(const Oid *callees, int ncallees);
extern void FencingUnmarkCallees(const Oid *callees, int ncallees);
extern bool FencingCalleeMarked(Oid funcid);

extern void FencingDeferError(void);
extern void FencingRaiseDeferredError(void);
extern bool FencingHasDeferredError(void);
extern void FencingDropDeferredError(void);
extern void FencingProvenanceInit(void);

#endif							/* FENCING_PROVENANCE_H */
