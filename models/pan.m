#define rand	pan_rand
#define pthread_equal(a,b)	((a)==(b))
#if defined(HAS_CODE) && defined(VERBOSE)
	#ifdef BFS_PAR
		bfs_printf("Pr: %d Tr: %d\n", II, t->forw);
	#else
		cpu_printf("Pr: %d Tr: %d\n", II, t->forw);
	#endif
#endif
	switch (t->forw) {
	default: Uerror("bad forward move");
	case 0:	/* if without executable clauses */
		continue;
	case 1: /* generic 'goto' or 'skip' */
		IfNotBlocked
		_m = 3; goto P999;
	case 2: /* generic 'else' */
		IfNotBlocked
		if (trpt->o_pm&1) continue;
		_m = 3; goto P999;

		 /* PROC :init: */
	case 3: // STATE 1 - lease.pml:212 - [connected[0] = 1] (0:6:5 - 1)
		IfNotBlocked
		reached[2][1] = 1;
		(trpt+1)->bup.ovals = grab_ints(5);
		(trpt+1)->bup.ovals[0] = ((int)now.connected[0]);
		now.connected[0] = 1;
#ifdef VAR_RANGES
		logval("connected[0]", ((int)now.connected[0]));
#endif
		;
		/* merge: alive[0] = 1(6, 2, 6) */
		reached[2][2] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.alive[0]);
		now.alive[0] = 1;
#ifdef VAR_RANGES
		logval("alive[0]", ((int)now.alive[0]));
#endif
		;
		/* merge: connected[1] = 1(6, 3, 6) */
		reached[2][3] = 1;
		(trpt+1)->bup.ovals[2] = ((int)now.connected[1]);
		now.connected[1] = 1;
#ifdef VAR_RANGES
		logval("connected[1]", ((int)now.connected[1]));
#endif
		;
		/* merge: alive[1] = 1(6, 4, 6) */
		reached[2][4] = 1;
		(trpt+1)->bup.ovals[3] = ((int)now.alive[1]);
		now.alive[1] = 1;
#ifdef VAR_RANGES
		logval("alive[1]", ((int)now.alive[1]));
#endif
		;
		/* merge: epoch[0] = 1(6, 5, 6) */
		reached[2][5] = 1;
		(trpt+1)->bup.ovals[4] = ((int)now.epoch[0]);
		now.epoch[0] = 1;
#ifdef VAR_RANGES
		logval("epoch[0]", ((int)now.epoch[0]));
#endif
		;
		_m = 3; goto P999; /* 4 */
	case 4: // STATE 6 - lease.pml:216 - [(run clock())] (0:0:0 - 1)
		IfNotBlocked
		reached[2][6] = 1;
		if (!(addproc(II, 1, 0, 0)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 5: // STATE 7 - lease.pml:216 - [(run worker(0))] (0:0:0 - 1)
		IfNotBlocked
		reached[2][7] = 1;
		if (!(addproc(II, 1, 1, 0)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 6: // STATE 8 - lease.pml:216 - [(run worker(1))] (0:0:0 - 1)
		IfNotBlocked
		reached[2][8] = 1;
		if (!(addproc(II, 1, 1, 1)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 7: // STATE 10 - lease.pml:218 - [-end-] (0:0:0 - 1)
		IfNotBlocked
		reached[2][10] = 1;
		if (!delproc(1, II)) continue;
		_m = 3; goto P999; /* 0 */

		 /* PROC worker */
	case 8: // STATE 1 - lease.pml:152 - [((now>=20))] (0:0:0 - 1)
		IfNotBlocked
		reached[1][1] = 1;
		if (!((((int)now.now)>=20)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 9: // STATE 3 - lease.pml:154 - [(((connected[w]&&alive[w])&&((now-base[w])>=2)))] (101:0:2 - 1)
		IfNotBlocked
		reached[1][3] = 1;
		if (!(((((int)now.connected[ Index(((int)((P1 *)_this)->w), 2) ])&&((int)now.alive[ Index(((int)((P1 *)_this)->w), 2) ]))&&((((int)now.now)-((int)now.base[ Index(((int)((P1 *)_this)->w), 2) ]))>=2))))
			continue;
		/* merge: lastRecv[w] = now(101, 4, 101) */
		reached[1][4] = 1;
		(trpt+1)->bup.ovals = grab_ints(2);
		(trpt+1)->bup.ovals[0] = ((int)now.lastRecv[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.lastRecv[ Index(((P1 *)_this)->w, 2) ] = ((int)now.now);
#ifdef VAR_RANGES
		logval("lastRecv[worker:w]", ((int)now.lastRecv[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: base[w] = now(101, 5, 101) */
		reached[1][5] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.base[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.base[ Index(((P1 *)_this)->w, 2) ] = ((int)now.now);
#ifdef VAR_RANGES
		logval("base[worker:w]", ((int)now.base[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: .(goto)(0, 102, 101) */
		reached[1][102] = 1;
		;
		_m = 3; goto P999; /* 3 */
	case 10: // STATE 7 - lease.pml:156 - [((connected[w]&&(now>=((base[w]+7)-1))))] (0:0:0 - 1)
		IfNotBlocked
		reached[1][7] = 1;
		if (!((((int)now.connected[ Index(((int)((P1 *)_this)->w), 2) ])&&(((int)now.now)>=((((int)now.base[ Index(((int)((P1 *)_this)->w), 2) ])+7)-1)))))
			continue;
		_m = 3; goto P999; /* 0 */
	case 11: // STATE 8 - lease.pml:102 - [connected[w] = 0] (0:0:1 - 1)
		IfNotBlocked
		reached[1][8] = 1;
		(trpt+1)->bup.oval = ((int)now.connected[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.connected[ Index(((P1 *)_this)->w, 2) ] = 0;
#ifdef VAR_RANGES
		logval("connected[worker:w]", ((int)now.connected[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 12: // STATE 9 - lease.pml:104 - [(alive[w])] (0:0:0 - 1)
		IfNotBlocked
		reached[1][9] = 1;
		if (!(((int)now.alive[ Index(((int)((P1 *)_this)->w), 2) ])))
			continue;
		_m = 3; goto P999; /* 0 */
	case 13: // STATE 10 - lease.pml:98 - [alive[w] = 0] (0:28:3 - 1)
		IfNotBlocked
		reached[1][10] = 1;
		(trpt+1)->bup.ovals = grab_ints(3);
		(trpt+1)->bup.ovals[0] = ((int)now.alive[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.alive[ Index(((P1 *)_this)->w, 2) ] = 0;
#ifdef VAR_RANGES
		logval("alive[worker:w]", ((int)now.alive[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: willPending[w] = 1(28, 11, 28) */
		reached[1][11] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.willPending[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.willPending[ Index(((P1 *)_this)->w, 2) ] = 1;
#ifdef VAR_RANGES
		logval("willPending[worker:w]", ((int)now.willPending[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: willSeen[w] = 1(28, 12, 28) */
		reached[1][12] = 1;
		(trpt+1)->bup.ovals[2] = ((int)now.willSeen[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.willSeen[ Index(((P1 *)_this)->w, 2) ] = 1;
#ifdef VAR_RANGES
		logval("willSeen[worker:w]", ((int)now.willSeen[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: .(goto)(0, 17, 28) */
		reached[1][17] = 1;
		;
		_m = 3; goto P999; /* 3 */
	case 14: // STATE 19 - lease.pml:91 - [out[w]?_] (0:0:1 - 1)
		reached[1][19] = 1;
		if (q_len(now.out[ Index(((int)((P1 *)_this)->w), 2) ]) == 0) continue;

		XX=1;
		(trpt+1)->bup.oval = qrecv(now.out[ Index(((int)((P1 *)_this)->w), 2) ], XX-1, 0, 0);
		;
		qrecv(now.out[ Index(((int)((P1 *)_this)->w), 2) ], XX-1, 0, 1);
		
#ifdef HAS_CODE
		if (readtrail && gui) {
			char simtmp[32];
			sprintf(simvals, "%d?", now.out[ Index(((int)((P1 *)_this)->w), 2) ]);
		sprintf(simtmp, "%d", ((int)_)); strcat(simvals, simtmp);		}
#endif
		;
		_m = 4; goto P999; /* 0 */
	case 15: // STATE 20 - lease.pml:92 - [(empty(out[w]))] (101:0:1 - 1)
		IfNotBlocked
		reached[1][20] = 1;
		if (!((q_len(now.out[ Index(((int)((P1 *)_this)->w), 2) ])==0)))
			continue;
		/* merge: goto :b3(101, 21, 101) */
		reached[1][21] = 1;
		;
		/* merge: .(goto)(101, 29, 101) */
		reached[1][29] = 1;
		;
		/* merge: confirming[w] = 1(101, 30, 101) */
		reached[1][30] = 1;
		(trpt+1)->bup.oval = ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = 1;
#ifdef VAR_RANGES
		logval("confirming[worker:w]", ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: .(goto)(0, 102, 101) */
		reached[1][102] = 1;
		;
		_m = 3; goto P999; /* 4 */
	case 16: // STATE 29 - lease.pml:111 - [.(goto)] (0:101:1 - 4)
		IfNotBlocked
		reached[1][29] = 1;
		;
		/* merge: confirming[w] = 1(101, 30, 101) */
		reached[1][30] = 1;
		(trpt+1)->bup.oval = ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = 1;
#ifdef VAR_RANGES
		logval("confirming[worker:w]", ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: .(goto)(0, 102, 101) */
		reached[1][102] = 1;
		;
		_m = 3; goto P999; /* 2 */
	case 17: // STATE 27 - lease.pml:109 - [(1)] (101:0:1 - 1)
		IfNotBlocked
		reached[1][27] = 1;
		if (!(1))
			continue;
		/* merge: .(goto)(101, 29, 101) */
		reached[1][29] = 1;
		;
		/* merge: confirming[w] = 1(101, 30, 101) */
		reached[1][30] = 1;
		(trpt+1)->bup.oval = ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = 1;
#ifdef VAR_RANGES
		logval("confirming[worker:w]", ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: .(goto)(0, 102, 101) */
		reached[1][102] = 1;
		;
		_m = 3; goto P999; /* 3 */
	case 18: // STATE 33 - lease.pml:159 - [(((((((connected[w]&&!(confirming[w]))&&(epoch[w]>0))&&(n[w]<2))&&(len(out[w])<2))&&(now<((base[w]+7)-1)))&&1))] (0:0:0 - 1)
		IfNotBlocked
		reached[1][33] = 1;
		if (!(((((((((int)now.connected[ Index(((int)((P1 *)_this)->w), 2) ])&& !(((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ])))&&(((int)now.epoch[ Index(((int)((P1 *)_this)->w), 2) ])>0))&&(((int)now.n[ Index(((int)((P1 *)_this)->w), 2) ])<2))&&(q_len(now.out[ Index(((int)((P1 *)_this)->w), 2) ])<2))&&(((int)now.now)<((((int)now.base[ Index(((int)((P1 *)_this)->w), 2) ])+7)-1)))&&1)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 19: // STATE 34 - lease.pml:159 - [out[w]!((epoch[w]*16)+n[w])] (101:0:1 - 1)
		IfNotBlocked
		reached[1][34] = 1;
		if (q_full(now.out[ Index(((int)((P1 *)_this)->w), 2) ]))
			continue;
#ifdef HAS_CODE
		if (readtrail && gui) {
			char simtmp[64];
			sprintf(simvals, "%d!", now.out[ Index(((int)((P1 *)_this)->w), 2) ]);
		sprintf(simtmp, "%d", ((((int)now.epoch[ Index(((int)((P1 *)_this)->w), 2) ])*16)+((int)now.n[ Index(((int)((P1 *)_this)->w), 2) ]))); strcat(simvals, simtmp);		}
#endif
		
		qsend(now.out[ Index(((int)((P1 *)_this)->w), 2) ], 0, ((((int)now.epoch[ Index(((int)((P1 *)_this)->w), 2) ])*16)+((int)now.n[ Index(((int)((P1 *)_this)->w), 2) ])), 1);
		/* merge: n[w] = (n[w]+1)(0, 35, 101) */
		reached[1][35] = 1;
		(trpt+1)->bup.oval = ((int)now.n[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.n[ Index(((P1 *)_this)->w, 2) ] = (((int)now.n[ Index(((int)((P1 *)_this)->w), 2) ])+1);
#ifdef VAR_RANGES
		logval("n[worker:w]", ((int)now.n[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: .(goto)(0, 102, 101) */
		reached[1][102] = 1;
		;
		_m = 2; goto P999; /* 2 */
	case 20: // STATE 37 - lease.pml:162 - [(((len(out[w])>0)&&connected[w]))] (0:0:0 - 1)
		IfNotBlocked
		reached[1][37] = 1;
		if (!(((q_len(now.out[ Index(((int)((P1 *)_this)->w), 2) ])>0)&&((int)now.connected[ Index(((int)((P1 *)_this)->w), 2) ]))))
			continue;
		_m = 3; goto P999; /* 0 */
	case 21: // STATE 38 - lease.pml:164 - [(alive[w])] (0:0:0 - 1)
		IfNotBlocked
		reached[1][38] = 1;
		if (!(((int)now.alive[ Index(((int)((P1 *)_this)->w), 2) ])))
			continue;
		_m = 3; goto P999; /* 0 */
	case 22: // STATE 39 - lease.pml:164 - [out[w]?x] (0:0:1 - 1)
		reached[1][39] = 1;
		if (q_len(now.out[ Index(((int)((P1 *)_this)->w), 2) ]) == 0) continue;

		XX=1;
		(trpt+1)->bup.oval = ((int)((P1 *)_this)->x);
		;
		((P1 *)_this)->x = qrecv(now.out[ Index(((int)((P1 *)_this)->w), 2) ], XX-1, 0, 1);
#ifdef VAR_RANGES
		logval("worker:x", ((int)((P1 *)_this)->x));
#endif
		;
		
#ifdef HAS_CODE
		if (readtrail && gui) {
			char simtmp[32];
			sprintf(simvals, "%d?", now.out[ Index(((int)((P1 *)_this)->w), 2) ]);
		sprintf(simtmp, "%d", ((int)((P1 *)_this)->x)); strcat(simvals, simtmp);		}
#endif
		;
		_m = 4; goto P999; /* 0 */
	case 23: // STATE 40 - lease.pml:84 - [assert((x>highest))] (0:101:2 - 1)
		IfNotBlocked
		reached[1][40] = 1;
		spin_assert((((int)((P1 *)_this)->x)>((int)now.highest)), "(x>highest)", II, tt, t);
		/* merge: highest = x(101, 41, 101) */
		reached[1][41] = 1;
		(trpt+1)->bup.ovals = grab_ints(2);
		(trpt+1)->bup.ovals[0] = ((int)now.highest);
		now.highest = ((int)((P1 *)_this)->x);
#ifdef VAR_RANGES
		logval("highest", ((int)now.highest));
#endif
		;
		/* merge: lastRecv[w] = now(101, 42, 101) */
		reached[1][42] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.lastRecv[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.lastRecv[ Index(((P1 *)_this)->w, 2) ] = ((int)now.now);
#ifdef VAR_RANGES
		logval("lastRecv[worker:w]", ((int)now.lastRecv[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: .(goto)(101, 70, 101) */
		reached[1][70] = 1;
		;
		/* merge: .(goto)(0, 102, 101) */
		reached[1][102] = 1;
		;
		_m = 3; goto P999; /* 4 */
	case 24: // STATE 70 - lease.pml:166 - [.(goto)] (0:101:0 - 2)
		IfNotBlocked
		reached[1][70] = 1;
		;
		/* merge: .(goto)(0, 102, 101) */
		reached[1][102] = 1;
		;
		_m = 3; goto P999; /* 1 */
	case 25: // STATE 45 - lease.pml:102 - [connected[w] = 0] (0:0:1 - 1)
		IfNotBlocked
		reached[1][45] = 1;
		(trpt+1)->bup.oval = ((int)now.connected[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.connected[ Index(((P1 *)_this)->w, 2) ] = 0;
#ifdef VAR_RANGES
		logval("connected[worker:w]", ((int)now.connected[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 26: // STATE 46 - lease.pml:104 - [(alive[w])] (0:0:0 - 1)
		IfNotBlocked
		reached[1][46] = 1;
		if (!(((int)now.alive[ Index(((int)((P1 *)_this)->w), 2) ])))
			continue;
		_m = 3; goto P999; /* 0 */
	case 27: // STATE 47 - lease.pml:98 - [alive[w] = 0] (0:65:3 - 1)
		IfNotBlocked
		reached[1][47] = 1;
		(trpt+1)->bup.ovals = grab_ints(3);
		(trpt+1)->bup.ovals[0] = ((int)now.alive[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.alive[ Index(((P1 *)_this)->w, 2) ] = 0;
#ifdef VAR_RANGES
		logval("alive[worker:w]", ((int)now.alive[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: willPending[w] = 1(65, 48, 65) */
		reached[1][48] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.willPending[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.willPending[ Index(((P1 *)_this)->w, 2) ] = 1;
#ifdef VAR_RANGES
		logval("willPending[worker:w]", ((int)now.willPending[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: willSeen[w] = 1(65, 49, 65) */
		reached[1][49] = 1;
		(trpt+1)->bup.ovals[2] = ((int)now.willSeen[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.willSeen[ Index(((P1 *)_this)->w, 2) ] = 1;
#ifdef VAR_RANGES
		logval("willSeen[worker:w]", ((int)now.willSeen[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: .(goto)(0, 54, 65) */
		reached[1][54] = 1;
		;
		_m = 3; goto P999; /* 3 */
	case 28: // STATE 56 - lease.pml:91 - [out[w]?_] (0:0:1 - 1)
		reached[1][56] = 1;
		if (q_len(now.out[ Index(((int)((P1 *)_this)->w), 2) ]) == 0) continue;

		XX=1;
		(trpt+1)->bup.oval = qrecv(now.out[ Index(((int)((P1 *)_this)->w), 2) ], XX-1, 0, 0);
		;
		qrecv(now.out[ Index(((int)((P1 *)_this)->w), 2) ], XX-1, 0, 1);
		
#ifdef HAS_CODE
		if (readtrail && gui) {
			char simtmp[32];
			sprintf(simvals, "%d?", now.out[ Index(((int)((P1 *)_this)->w), 2) ]);
		sprintf(simtmp, "%d", ((int)_)); strcat(simvals, simtmp);		}
#endif
		;
		_m = 4; goto P999; /* 0 */
	case 29: // STATE 57 - lease.pml:92 - [(empty(out[w]))] (101:0:1 - 1)
		IfNotBlocked
		reached[1][57] = 1;
		if (!((q_len(now.out[ Index(((int)((P1 *)_this)->w), 2) ])==0)))
			continue;
		/* merge: goto :b4(101, 58, 101) */
		reached[1][58] = 1;
		;
		/* merge: confirming[w] = 1(101, 67, 101) */
		reached[1][67] = 1;
		(trpt+1)->bup.oval = ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = 1;
#ifdef VAR_RANGES
		logval("confirming[worker:w]", ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: .(goto)(101, 70, 101) */
		reached[1][70] = 1;
		;
		/* merge: .(goto)(0, 102, 101) */
		reached[1][102] = 1;
		;
		_m = 3; goto P999; /* 4 */
	case 30: // STATE 64 - lease.pml:109 - [(1)] (101:0:1 - 1)
		IfNotBlocked
		reached[1][64] = 1;
		if (!(1))
			continue;
		/* merge: .(goto)(101, 66, 101) */
		reached[1][66] = 1;
		;
		/* merge: confirming[w] = 1(101, 67, 101) */
		reached[1][67] = 1;
		(trpt+1)->bup.oval = ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = 1;
#ifdef VAR_RANGES
		logval("confirming[worker:w]", ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: .(goto)(101, 70, 101) */
		reached[1][70] = 1;
		;
		/* merge: .(goto)(0, 102, 101) */
		reached[1][102] = 1;
		;
		_m = 3; goto P999; /* 4 */
	case 31: // STATE 67 - lease.pml:111 - [confirming[w] = 1] (0:101:1 - 5)
		IfNotBlocked
		reached[1][67] = 1;
		(trpt+1)->bup.oval = ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = 1;
#ifdef VAR_RANGES
		logval("confirming[worker:w]", ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: .(goto)(101, 70, 101) */
		reached[1][70] = 1;
		;
		/* merge: .(goto)(0, 102, 101) */
		reached[1][102] = 1;
		;
		_m = 3; goto P999; /* 2 */
	case 32: // STATE 72 - lease.pml:168 - [((!(connected[w])&&!(alive[w])))] (101:0:4 - 1)
		IfNotBlocked
		reached[1][72] = 1;
		if (!(( !(((int)now.connected[ Index(((int)((P1 *)_this)->w), 2) ]))&& !(((int)now.alive[ Index(((int)((P1 *)_this)->w), 2) ])))))
			continue;
		/* merge: connected[w] = 1(101, 73, 101) */
		reached[1][73] = 1;
		(trpt+1)->bup.ovals = grab_ints(4);
		(trpt+1)->bup.ovals[0] = ((int)now.connected[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.connected[ Index(((P1 *)_this)->w, 2) ] = 1;
#ifdef VAR_RANGES
		logval("connected[worker:w]", ((int)now.connected[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: alive[w] = 1(101, 74, 101) */
		reached[1][74] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.alive[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.alive[ Index(((P1 *)_this)->w, 2) ] = 1;
#ifdef VAR_RANGES
		logval("alive[worker:w]", ((int)now.alive[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: lastRecv[w] = now(101, 75, 101) */
		reached[1][75] = 1;
		(trpt+1)->bup.ovals[2] = ((int)now.lastRecv[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.lastRecv[ Index(((P1 *)_this)->w, 2) ] = ((int)now.now);
#ifdef VAR_RANGES
		logval("lastRecv[worker:w]", ((int)now.lastRecv[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: base[w] = now(101, 76, 101) */
		reached[1][76] = 1;
		(trpt+1)->bup.ovals[3] = ((int)now.base[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.base[ Index(((P1 *)_this)->w, 2) ] = ((int)now.now);
#ifdef VAR_RANGES
		logval("base[worker:w]", ((int)now.base[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: .(goto)(0, 102, 101) */
		reached[1][102] = 1;
		;
		_m = 3; goto P999; /* 5 */
	case 33: // STATE 78 - lease.pml:171 - [(((connected[w]&&alive[w])&&confirming[w]))] (0:0:0 - 1)
		IfNotBlocked
		reached[1][78] = 1;
		if (!(((((int)now.connected[ Index(((int)((P1 *)_this)->w), 2) ])&&((int)now.alive[ Index(((int)((P1 *)_this)->w), 2) ]))&&((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]))))
			continue;
		_m = 3; goto P999; /* 0 */
	case 34: // STATE 79 - lease.pml:173 - [(willSeen[w])] (101:0:4 - 1)
		IfNotBlocked
		reached[1][79] = 1;
		if (!(((int)now.willSeen[ Index(((int)((P1 *)_this)->w), 2) ])))
			continue;
		/* merge: epoch[w] = 0(101, 80, 101) */
		reached[1][80] = 1;
		(trpt+1)->bup.ovals = grab_ints(4);
		(trpt+1)->bup.ovals[0] = ((int)now.epoch[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.epoch[ Index(((P1 *)_this)->w, 2) ] = 0;
#ifdef VAR_RANGES
		logval("epoch[worker:w]", ((int)now.epoch[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: .(goto)(101, 84, 101) */
		reached[1][84] = 1;
		;
		/* merge: willPending[(1-w)] = (willPending[(1-w)]&&!(alive[(1-w)]))(101, 85, 101) */
		reached[1][85] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.willPending[ Index((1-((int)((P1 *)_this)->w)), 2) ]);
		now.willPending[ Index((1-((P1 *)_this)->w), 2) ] = (((int)now.willPending[ Index((1-((int)((P1 *)_this)->w)), 2) ])&& !(((int)now.alive[ Index((1-((int)((P1 *)_this)->w)), 2) ])));
#ifdef VAR_RANGES
		logval("willPending[(1-worker:w)]", ((int)now.willPending[ Index((1-((int)((P1 *)_this)->w)), 2) ]));
#endif
		;
		/* merge: willSeen[w] = 0(101, 86, 101) */
		reached[1][86] = 1;
		(trpt+1)->bup.ovals[2] = ((int)now.willSeen[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.willSeen[ Index(((P1 *)_this)->w, 2) ] = 0;
#ifdef VAR_RANGES
		logval("willSeen[worker:w]", ((int)now.willSeen[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: confirming[w] = 0(101, 87, 101) */
		reached[1][87] = 1;
		(trpt+1)->bup.ovals[3] = ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = 0;
#ifdef VAR_RANGES
		logval("confirming[worker:w]", ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: .(goto)(0, 102, 101) */
		reached[1][102] = 1;
		;
		_m = 3; goto P999; /* 6 */
	case 35: // STATE 82 - lease.pml:174 - [(1)] (101:0:3 - 1)
		IfNotBlocked
		reached[1][82] = 1;
		if (!(1))
			continue;
		/* merge: .(goto)(101, 84, 101) */
		reached[1][84] = 1;
		;
		/* merge: willPending[(1-w)] = (willPending[(1-w)]&&!(alive[(1-w)]))(101, 85, 101) */
		reached[1][85] = 1;
		(trpt+1)->bup.ovals = grab_ints(3);
		(trpt+1)->bup.ovals[0] = ((int)now.willPending[ Index((1-((int)((P1 *)_this)->w)), 2) ]);
		now.willPending[ Index((1-((P1 *)_this)->w), 2) ] = (((int)now.willPending[ Index((1-((int)((P1 *)_this)->w)), 2) ])&& !(((int)now.alive[ Index((1-((int)((P1 *)_this)->w)), 2) ])));
#ifdef VAR_RANGES
		logval("willPending[(1-worker:w)]", ((int)now.willPending[ Index((1-((int)((P1 *)_this)->w)), 2) ]));
#endif
		;
		/* merge: willSeen[w] = 0(101, 86, 101) */
		reached[1][86] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.willSeen[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.willSeen[ Index(((P1 *)_this)->w, 2) ] = 0;
#ifdef VAR_RANGES
		logval("willSeen[worker:w]", ((int)now.willSeen[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: confirming[w] = 0(101, 87, 101) */
		reached[1][87] = 1;
		(trpt+1)->bup.ovals[2] = ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = 0;
#ifdef VAR_RANGES
		logval("confirming[worker:w]", ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: .(goto)(0, 102, 101) */
		reached[1][102] = 1;
		;
		_m = 3; goto P999; /* 5 */
	case 36: // STATE 85 - lease.pml:178 - [willPending[(1-w)] = (willPending[(1-w)]&&!(alive[(1-w)]))] (0:101:3 - 3)
		IfNotBlocked
		reached[1][85] = 1;
		(trpt+1)->bup.ovals = grab_ints(3);
		(trpt+1)->bup.ovals[0] = ((int)now.willPending[ Index((1-((int)((P1 *)_this)->w)), 2) ]);
		now.willPending[ Index((1-((P1 *)_this)->w), 2) ] = (((int)now.willPending[ Index((1-((int)((P1 *)_this)->w)), 2) ])&& !(((int)now.alive[ Index((1-((int)((P1 *)_this)->w)), 2) ])));
#ifdef VAR_RANGES
		logval("willPending[(1-worker:w)]", ((int)now.willPending[ Index((1-((int)((P1 *)_this)->w)), 2) ]));
#endif
		;
		/* merge: willSeen[w] = 0(101, 86, 101) */
		reached[1][86] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.willSeen[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.willSeen[ Index(((P1 *)_this)->w, 2) ] = 0;
#ifdef VAR_RANGES
		logval("willSeen[worker:w]", ((int)now.willSeen[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: confirming[w] = 0(101, 87, 101) */
		reached[1][87] = 1;
		(trpt+1)->bup.ovals[2] = ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = 0;
#ifdef VAR_RANGES
		logval("confirming[worker:w]", ((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: .(goto)(0, 102, 101) */
		reached[1][102] = 1;
		;
		_m = 3; goto P999; /* 3 */
	case 37: // STATE 89 - lease.pml:183 - [((((connected[w]&&alive[w])&&!(confirming[w]))&&willPending[(1-w)]))] (98:0:1 - 1)
		IfNotBlocked
		reached[1][89] = 1;
		if (!((((((int)now.connected[ Index(((int)((P1 *)_this)->w), 2) ])&&((int)now.alive[ Index(((int)((P1 *)_this)->w), 2) ]))&& !(((int)now.confirming[ Index(((int)((P1 *)_this)->w), 2) ])))&&((int)now.willPending[ Index((1-((int)((P1 *)_this)->w)), 2) ]))))
			continue;
		/* merge: willPending[(1-w)] = 0(0, 90, 98) */
		reached[1][90] = 1;
		(trpt+1)->bup.oval = ((int)now.willPending[ Index((1-((int)((P1 *)_this)->w)), 2) ]);
		now.willPending[ Index((1-((P1 *)_this)->w), 2) ] = 0;
#ifdef VAR_RANGES
		logval("willPending[(1-worker:w)]", ((int)now.willPending[ Index((1-((int)((P1 *)_this)->w)), 2) ]));
#endif
		;
		_m = 3; goto P999; /* 1 */
	case 38: // STATE 91 - lease.pml:186 - [(((holder0==(w==1))&&(epoch[w]==0)))] (101:0:4 - 1)
		IfNotBlocked
		reached[1][91] = 1;
		if (!(((((int)now.holder0)==(((int)((P1 *)_this)->w)==1))&&(((int)now.epoch[ Index(((int)((P1 *)_this)->w), 2) ])==0))))
			continue;
		/* merge: epoch[w] = (rideEpoch+1)(101, 92, 101) */
		reached[1][92] = 1;
		(trpt+1)->bup.ovals = grab_ints(4);
		(trpt+1)->bup.ovals[0] = ((int)now.epoch[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.epoch[ Index(((P1 *)_this)->w, 2) ] = (((int)now.rideEpoch)+1);
#ifdef VAR_RANGES
		logval("epoch[worker:w]", ((int)now.epoch[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: rideEpoch = epoch[w](101, 93, 101) */
		reached[1][93] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.rideEpoch);
		now.rideEpoch = ((int)now.epoch[ Index(((int)((P1 *)_this)->w), 2) ]);
#ifdef VAR_RANGES
		logval("rideEpoch", ((int)now.rideEpoch));
#endif
		;
		/* merge: n[w] = 0(101, 94, 101) */
		reached[1][94] = 1;
		(trpt+1)->bup.ovals[2] = ((int)now.n[ Index(((int)((P1 *)_this)->w), 2) ]);
		now.n[ Index(((P1 *)_this)->w, 2) ] = 0;
#ifdef VAR_RANGES
		logval("n[worker:w]", ((int)now.n[ Index(((int)((P1 *)_this)->w), 2) ]));
#endif
		;
		/* merge: holder0 = (w==0)(101, 95, 101) */
		reached[1][95] = 1;
		(trpt+1)->bup.ovals[3] = ((int)now.holder0);
		now.holder0 = (((int)((P1 *)_this)->w)==0);
#ifdef VAR_RANGES
		logval("holder0", ((int)now.holder0));
#endif
		;
		/* merge: .(goto)(101, 99, 101) */
		reached[1][99] = 1;
		;
		/* merge: .(goto)(0, 102, 101) */
		reached[1][102] = 1;
		;
		_m = 3; goto P999; /* 6 */
	case 39: // STATE 99 - lease.pml:189 - [.(goto)] (0:101:0 - 2)
		IfNotBlocked
		reached[1][99] = 1;
		;
		/* merge: .(goto)(0, 102, 101) */
		reached[1][102] = 1;
		;
		_m = 3; goto P999; /* 1 */
	case 40: // STATE 97 - lease.pml:188 - [(1)] (101:0:0 - 1)
		IfNotBlocked
		reached[1][97] = 1;
		if (!(1))
			continue;
		/* merge: .(goto)(101, 99, 101) */
		reached[1][99] = 1;
		;
		/* merge: .(goto)(0, 102, 101) */
		reached[1][102] = 1;
		;
		_m = 3; goto P999; /* 2 */
	case 41: // STATE 104 - lease.pml:208 - [-end-] (0:0:0 - 3)
		IfNotBlocked
		reached[1][104] = 1;
		if (!delproc(1, II)) continue;
		_m = 3; goto P999; /* 0 */

		 /* PROC clock */
	case 42: // STATE 1 - lease.pml:126 - [((now<20))] (0:0:0 - 1)
		IfNotBlocked
		reached[0][1] = 1;
		if (!((((int)now.now)<20)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 43: // STATE 2 - lease.pml:128 - [now = (now+1)] (0:29:2 - 1)
		IfNotBlocked
		reached[0][2] = 1;
		(trpt+1)->bup.ovals = grab_ints(2);
		(trpt+1)->bup.ovals[0] = ((int)now.now);
		now.now = (((int)now.now)+1);
#ifdef VAR_RANGES
		logval("now", ((int)now.now));
#endif
		;
		/* merge: w = 0(29, 3, 29) */
		reached[0][3] = 1;
		(trpt+1)->bup.ovals[1] = ((int)((P0 *)_this)->w);
		((P0 *)_this)->w = 0;
#ifdef VAR_RANGES
		logval("clock:w", ((int)((P0 *)_this)->w));
#endif
		;
		/* merge: .(goto)(0, 30, 29) */
		reached[0][30] = 1;
		;
		_m = 3; goto P999; /* 2 */
	case 44: // STATE 4 - lease.pml:129 - [((w<=1))] (0:0:0 - 1)
		IfNotBlocked
		reached[0][4] = 1;
		if (!((((int)((P0 *)_this)->w)<=1)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 45: // STATE 5 - lease.pml:131 - [((alive[w]&&((now-lastRecv[w])>=7)))] (0:0:0 - 1)
		IfNotBlocked
		reached[0][5] = 1;
		if (!((((int)now.alive[ Index(((int)((P0 *)_this)->w), 2) ])&&((((int)now.now)-((int)now.lastRecv[ Index(((int)((P0 *)_this)->w), 2) ]))>=7))))
			continue;
		_m = 3; goto P999; /* 0 */
	case 46: // STATE 6 - lease.pml:98 - [alive[w] = 0] (0:24:3 - 1)
		IfNotBlocked
		reached[0][6] = 1;
		(trpt+1)->bup.ovals = grab_ints(3);
		(trpt+1)->bup.ovals[0] = ((int)now.alive[ Index(((int)((P0 *)_this)->w), 2) ]);
		now.alive[ Index(((P0 *)_this)->w, 2) ] = 0;
#ifdef VAR_RANGES
		logval("alive[clock:w]", ((int)now.alive[ Index(((int)((P0 *)_this)->w), 2) ]));
#endif
		;
		/* merge: willPending[w] = 1(24, 7, 24) */
		reached[0][7] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.willPending[ Index(((int)((P0 *)_this)->w), 2) ]);
		now.willPending[ Index(((P0 *)_this)->w, 2) ] = 1;
#ifdef VAR_RANGES
		logval("willPending[clock:w]", ((int)now.willPending[ Index(((int)((P0 *)_this)->w), 2) ]));
#endif
		;
		/* merge: willSeen[w] = 1(24, 8, 24) */
		reached[0][8] = 1;
		(trpt+1)->bup.ovals[2] = ((int)now.willSeen[ Index(((int)((P0 *)_this)->w), 2) ]);
		now.willSeen[ Index(((P0 *)_this)->w, 2) ] = 1;
#ifdef VAR_RANGES
		logval("willSeen[clock:w]", ((int)now.willSeen[ Index(((int)((P0 *)_this)->w), 2) ]));
#endif
		;
		/* merge: .(goto)(0, 13, 24) */
		reached[0][13] = 1;
		;
		_m = 3; goto P999; /* 3 */
	case 47: // STATE 14 - lease.pml:135 - [(((etcdExp[w]!=0)&&(now>=etcdExp[w])))] (20:0:1 - 1)
		IfNotBlocked
		reached[0][14] = 1;
		if (!(((((int)now.etcdExp[ Index(((int)((P0 *)_this)->w), 2) ])!=0)&&(((int)now.now)>=((int)now.etcdExp[ Index(((int)((P0 *)_this)->w), 2) ])))))
			continue;
		/* merge: etcdExp[w] = 0(0, 15, 20) */
		reached[0][15] = 1;
		(trpt+1)->bup.oval = ((int)now.etcdExp[ Index(((int)((P0 *)_this)->w), 2) ]);
		now.etcdExp[ Index(((P0 *)_this)->w, 2) ] = 0;
#ifdef VAR_RANGES
		logval("etcdExp[clock:w]", ((int)now.etcdExp[ Index(((int)((P0 *)_this)->w), 2) ]));
#endif
		;
		_m = 3; goto P999; /* 1 */
	case 48: // STATE 16 - lease.pml:138 - [((owner==w))] (29:0:2 - 1)
		IfNotBlocked
		reached[0][16] = 1;
		if (!((((int)now.owner)==((int)((P0 *)_this)->w))))
			continue;
		/* merge: owner = 255(29, 17, 29) */
		reached[0][17] = 1;
		(trpt+1)->bup.ovals = grab_ints(2);
		(trpt+1)->bup.ovals[0] = ((int)now.owner);
		now.owner = 255;
#ifdef VAR_RANGES
		logval("owner", ((int)now.owner));
#endif
		;
		/* merge: .(goto)(29, 21, 29) */
		reached[0][21] = 1;
		;
		/* merge: .(goto)(29, 25, 29) */
		reached[0][25] = 1;
		;
		/* merge: w = (w+1)(29, 26, 29) */
		reached[0][26] = 1;
		(trpt+1)->bup.ovals[1] = ((int)((P0 *)_this)->w);
		((P0 *)_this)->w = (((int)((P0 *)_this)->w)+1);
#ifdef VAR_RANGES
		logval("clock:w", ((int)((P0 *)_this)->w));
#endif
		;
		/* merge: .(goto)(0, 30, 29) */
		reached[0][30] = 1;
		;
		_m = 3; goto P999; /* 5 */
	case 49: // STATE 19 - lease.pml:139 - [(1)] (29:0:1 - 1)
		IfNotBlocked
		reached[0][19] = 1;
		if (!(1))
			continue;
		/* merge: .(goto)(29, 21, 29) */
		reached[0][21] = 1;
		;
		/* merge: .(goto)(29, 25, 29) */
		reached[0][25] = 1;
		;
		/* merge: w = (w+1)(29, 26, 29) */
		reached[0][26] = 1;
		(trpt+1)->bup.oval = ((int)((P0 *)_this)->w);
		((P0 *)_this)->w = (((int)((P0 *)_this)->w)+1);
#ifdef VAR_RANGES
		logval("clock:w", ((int)((P0 *)_this)->w));
#endif
		;
		/* merge: .(goto)(0, 30, 29) */
		reached[0][30] = 1;
		;
		_m = 3; goto P999; /* 4 */
	case 50: // STATE 23 - lease.pml:141 - [(1)] (29:0:1 - 1)
		IfNotBlocked
		reached[0][23] = 1;
		if (!(1))
			continue;
		/* merge: .(goto)(29, 25, 29) */
		reached[0][25] = 1;
		;
		/* merge: w = (w+1)(29, 26, 29) */
		reached[0][26] = 1;
		(trpt+1)->bup.oval = ((int)((P0 *)_this)->w);
		((P0 *)_this)->w = (((int)((P0 *)_this)->w)+1);
#ifdef VAR_RANGES
		logval("clock:w", ((int)((P0 *)_this)->w));
#endif
		;
		/* merge: .(goto)(0, 30, 29) */
		reached[0][30] = 1;
		;
		_m = 3; goto P999; /* 3 */
	case 51: // STATE 26 - lease.pml:129 - [w = (w+1)] (0:29:1 - 5)
		IfNotBlocked
		reached[0][26] = 1;
		(trpt+1)->bup.oval = ((int)((P0 *)_this)->w);
		((P0 *)_this)->w = (((int)((P0 *)_this)->w)+1);
#ifdef VAR_RANGES
		logval("clock:w", ((int)((P0 *)_this)->w));
#endif
		;
		/* merge: .(goto)(0, 30, 29) */
		reached[0][30] = 1;
		;
		_m = 3; goto P999; /* 1 */
	case 52: // STATE 33 - lease.pml:145 - [((now>=20))] (0:0:0 - 1)
		IfNotBlocked
		reached[0][33] = 1;
		if (!((((int)now.now)>=20)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 53: // STATE 38 - lease.pml:147 - [-end-] (0:0:0 - 3)
		IfNotBlocked
		reached[0][38] = 1;
		if (!delproc(1, II)) continue;
		_m = 3; goto P999; /* 0 */
	case  _T5:	/* np_ */
		if (!((!(trpt->o_pm&4) && !(trpt->tau&128))))
			continue;
		/* else fall through */
	case  _T2:	/* true */
		_m = 3; goto P999;
#undef rand
	}

