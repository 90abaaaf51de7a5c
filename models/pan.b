	switch (t->back) {
	default: Uerror("bad return move");
	case  0: goto R999; /* nothing to undo */

		 /* PROC :init: */

	case 3: // STATE 5
		;
		now.epoch[0] = trpt->bup.ovals[4];
		now.alive[1] = trpt->bup.ovals[3];
		now.connected[1] = trpt->bup.ovals[2];
		now.alive[0] = trpt->bup.ovals[1];
		now.connected[0] = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 5);
		goto R999;

	case 4: // STATE 6
		;
		;
		delproc(0, now._nr_pr-1);
		;
		goto R999;

	case 5: // STATE 7
		;
		;
		delproc(0, now._nr_pr-1);
		;
		goto R999;

	case 6: // STATE 8
		;
		;
		delproc(0, now._nr_pr-1);
		;
		goto R999;

	case 7: // STATE 10
		;
		p_restor(II);
		;
		;
		goto R999;

		 /* PROC worker */
;
		;
		
	case 9: // STATE 5
		;
		now.base[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[1];
		now.lastRecv[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 2);
		goto R999;
;
		;
		
	case 11: // STATE 8
		;
		now.connected[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.oval;
		;
		goto R999;
;
		;
		
	case 13: // STATE 12
		;
		now.willSeen[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[2];
		now.willPending[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[1];
		now.alive[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 3);
		goto R999;

	case 14: // STATE 19
		;
		XX = 1;
		unrecv(now.out[ Index(((int)((P1 *)_this)->w), 2) ], XX-1, 0, trpt->bup.oval, 1);
		;
		;
		goto R999;

	case 15: // STATE 30
		;
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.oval;
		;
		goto R999;

	case 16: // STATE 30
		;
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.oval;
		;
		goto R999;

	case 17: // STATE 30
		;
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.oval;
		;
		goto R999;
;
		;
		
	case 19: // STATE 35
		;
		now.n[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.oval;
		_m = unsend(now.out[ Index(((int)((P1 *)_this)->w), 2) ]);
		;
		goto R999;
;
		;
		;
		;
		
	case 22: // STATE 39
		;
		XX = 1;
		unrecv(now.out[ Index(((int)((P1 *)_this)->w), 2) ], XX-1, 0, ((int)((P1 *)_this)->x), 1);
		((P1 *)_this)->x = trpt->bup.oval;
		;
		;
		goto R999;

	case 23: // STATE 42
		;
		now.lastRecv[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[1];
		now.highest = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 2);
		goto R999;
;
		
	case 24: // STATE 70
		goto R999;

	case 25: // STATE 45
		;
		now.connected[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.oval;
		;
		goto R999;
;
		;
		
	case 27: // STATE 49
		;
		now.willSeen[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[2];
		now.willPending[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[1];
		now.alive[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 3);
		goto R999;

	case 28: // STATE 56
		;
		XX = 1;
		unrecv(now.out[ Index(((int)((P1 *)_this)->w), 2) ], XX-1, 0, trpt->bup.oval, 1);
		;
		;
		goto R999;

	case 29: // STATE 67
		;
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.oval;
		;
		goto R999;

	case 30: // STATE 67
		;
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.oval;
		;
		goto R999;

	case 31: // STATE 67
		;
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.oval;
		;
		goto R999;

	case 32: // STATE 76
		;
		now.base[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[3];
		now.lastRecv[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[2];
		now.alive[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[1];
		now.connected[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 4);
		goto R999;
;
		;
		
	case 34: // STATE 87
		;
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[3];
		now.willSeen[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[2];
		now.willPending[ Index((1-((P1 *)_this)->w), 2) ] = trpt->bup.ovals[1];
		now.epoch[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 4);
		goto R999;

	case 35: // STATE 87
		;
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[2];
		now.willSeen[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[1];
		now.willPending[ Index((1-((P1 *)_this)->w), 2) ] = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 3);
		goto R999;

	case 36: // STATE 87
		;
		now.confirming[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[2];
		now.willSeen[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[1];
		now.willPending[ Index((1-((P1 *)_this)->w), 2) ] = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 3);
		goto R999;

	case 37: // STATE 90
		;
		now.willPending[ Index((1-((P1 *)_this)->w), 2) ] = trpt->bup.oval;
		;
		goto R999;

	case 38: // STATE 95
		;
		now.holder0 = trpt->bup.ovals[3];
		now.n[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[2];
		now.rideEpoch = trpt->bup.ovals[1];
		now.epoch[ Index(((P1 *)_this)->w, 2) ] = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 4);
		goto R999;
;
		
	case 39: // STATE 99
		goto R999;
;
		
	case 40: // STATE 97
		goto R999;

	case 41: // STATE 104
		;
		p_restor(II);
		;
		;
		goto R999;

		 /* PROC clock */
;
		;
		
	case 43: // STATE 3
		;
		((P0 *)_this)->w = trpt->bup.ovals[1];
		now.now = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 2);
		goto R999;
;
		;
		;
		;
		
	case 46: // STATE 8
		;
		now.willSeen[ Index(((P0 *)_this)->w, 2) ] = trpt->bup.ovals[2];
		now.willPending[ Index(((P0 *)_this)->w, 2) ] = trpt->bup.ovals[1];
		now.alive[ Index(((P0 *)_this)->w, 2) ] = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 3);
		goto R999;

	case 47: // STATE 15
		;
		now.etcdExp[ Index(((P0 *)_this)->w, 2) ] = trpt->bup.oval;
		;
		goto R999;

	case 48: // STATE 26
		;
		((P0 *)_this)->w = trpt->bup.ovals[1];
		now.owner = trpt->bup.ovals[0];
		;
		ungrab_ints(trpt->bup.ovals, 2);
		goto R999;

	case 49: // STATE 26
		;
		((P0 *)_this)->w = trpt->bup.oval;
		;
		goto R999;

	case 50: // STATE 26
		;
		((P0 *)_this)->w = trpt->bup.oval;
		;
		goto R999;

	case 51: // STATE 26
		;
		((P0 *)_this)->w = trpt->bup.oval;
		;
		goto R999;
;
		;
		
	case 53: // STATE 38
		;
		p_restor(II);
		;
		;
		goto R999;
	}

