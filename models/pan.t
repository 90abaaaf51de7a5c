#ifdef PEG
struct T_SRC {
	char *fl; int ln;
} T_SRC[NTRANS];

void
tr_2_src(int m, char *file, int ln)
{	T_SRC[m].fl = file;
	T_SRC[m].ln = ln;
}

void
putpeg(int n, int m)
{	printf("%5d	trans %4d ", m, n);
	printf("%s:%d\n",
		T_SRC[n].fl, T_SRC[n].ln);
}
#endif

void
settable(void)
{	Trans *T;
	Trans *settr(int, int, int, int, int, char *, int, int, int);

	trans = (Trans ***) emalloc(4*sizeof(Trans **));

	/* proctype 2: :init: */

	trans[2] = (Trans **) emalloc(11*sizeof(Trans *));

	T = trans[ 2][9] = settr(150,2,0,0,0,"ATOMIC", 1, 2, 0);
	T->nxt	= settr(150,2,1,0,0,"ATOMIC", 1, 2, 0);
	trans[2][1]	= settr(142,2,6,3,3,"connected[0] = 1", 1, 2, 0); /* m: 2 -> 0,6 */
	reached2[2] = 1;
	trans[2][2]	= settr(0,0,0,0,0,"alive[0] = 1",0,0,0);
	trans[2][3]	= settr(0,0,0,0,0,"connected[1] = 1",0,0,0);
	trans[2][4]	= settr(0,0,0,0,0,"alive[1] = 1",0,0,0);
	trans[2][5]	= settr(0,0,0,0,0,"epoch[0] = 1",0,0,0);
	trans[2][6]	= settr(147,2,7,4,4,"(run clock())", 1, 2, 0);
	trans[2][7]	= settr(148,2,8,5,5,"(run worker(0))", 1, 2, 0);
	trans[2][8]	= settr(149,0,10,6,6,"(run worker(1))", 1, 2, 0);
	trans[2][10]	= settr(151,0,0,7,7,"-end-", 0, 3500, 0);

	/* proctype 1: worker */

	trans[1] = (Trans **) emalloc(105*sizeof(Trans *));

	trans[1][102]	= settr(139,0,101,1,0,".(goto)", 0, 2, 0);
	T = trans[1][101] = settr(138,0,0,0,0,"DO", 0, 2, 0);
	T = T->nxt	= settr(138,0,1,0,0,"DO", 0, 2, 0);
	T = T->nxt	= settr(138,0,6,0,0,"DO", 0, 2, 0);
	T = T->nxt	= settr(138,0,32,0,0,"DO", 0, 2, 0);
	T = T->nxt	= settr(138,0,36,0,0,"DO", 0, 2, 0);
	T = T->nxt	= settr(138,0,71,0,0,"DO", 0, 2, 0);
	T = T->nxt	= settr(138,0,77,0,0,"DO", 0, 2, 0);
	T = T->nxt	= settr(138,0,88,0,0,"DO", 0, 2, 0);
	    T->nxt	= settr(138,0,100,0,0,"DO", 0, 2, 0);
	trans[1][1]	= settr(38,0,104,8,0,"((now>=20))", 1, 2, 0);
	trans[1][2]	= settr(39,0,104,1,0,"goto :b2", 0, 2, 0);
	T = trans[ 1][6] = settr(43,2,0,0,0,"ATOMIC", 1, 2, 0);
	T->nxt	= settr(43,2,3,0,0,"ATOMIC", 1, 2, 0);
	trans[1][3]	= settr(40,0,101,9,9,"(((connected[w]&&alive[w])&&((now-base[w])>=2)))", 1, 2, 0); /* m: 4 -> 101,0 */
	reached1[4] = 1;
	trans[1][4]	= settr(0,0,0,0,0,"lastRecv[w] = now",0,0,0);
	trans[1][5]	= settr(0,0,0,0,0,"base[w] = now",0,0,0);
	T = trans[ 1][32] = settr(69,2,0,0,0,"ATOMIC", 1, 2, 0);
	T->nxt	= settr(69,2,7,0,0,"ATOMIC", 1, 2, 0);
	trans[1][7]	= settr(44,2,31,10,0,"((connected[w]&&(now>=((base[w]+7)-1))))", 1, 2, 0);
	T = trans[ 1][31] = settr(68,0,0,0,0,"sub-sequence", 1, 2, 0);
	T->nxt	= settr(68,0,8,0,0,"sub-sequence", 1, 2, 0);
	trans[1][8]	= settr(45,2,16,11,11,"connected[w] = 0", 1, 2, 0);
	T = trans[1][16] = settr(53,2,0,0,0,"IF", 1, 2, 0);
	T = T->nxt	= settr(53,2,9,0,0,"IF", 1, 2, 0);
	    T->nxt	= settr(53,2,14,0,0,"IF", 1, 2, 0);
	trans[1][9]	= settr(46,2,13,12,0,"(alive[w])", 1, 2, 0);
	T = trans[ 1][13] = settr(50,0,0,0,0,"sub-sequence", 1, 2, 0);
	T->nxt	= settr(50,0,10,0,0,"sub-sequence", 1, 2, 0);
	trans[1][10]	= settr(47,2,28,13,13,"alive[w] = 0", 1, 2, 0); /* m: 11 -> 0,28 */
	reached1[11] = 1;
	trans[1][11]	= settr(0,0,0,0,0,"willPending[w] = 1",0,0,0);
	trans[1][12]	= settr(0,0,0,0,0,"willSeen[w] = 1",0,0,0);
	trans[1][17]	= settr(54,2,28,1,0,".(goto)", 1, 2, 0);
	trans[1][14]	= settr(51,2,15,2,0,"else", 1, 2, 0);
	trans[1][15]	= settr(52,2,28,1,0,"(1)", 1, 2, 0);
	T = trans[1][28] = settr(65,2,0,0,0,"IF", 1, 2, 0);
	T = T->nxt	= settr(65,2,18,0,0,"IF", 1, 2, 0);
	    T->nxt	= settr(65,2,26,0,0,"IF", 1, 2, 0);
	trans[1][18]	= settr(55,2,25,1,0,"(1)", 1, 2, 0);
	T = trans[ 1][25] = settr(62,0,0,0,0,"sub-sequence", 1, 2, 0);
	T->nxt	= settr(62,0,22,0,0,"sub-sequence", 1, 2, 0);
	trans[1][23]	= settr(60,2,22,1,0,".(goto)", 1, 2, 0);
	T = trans[1][22] = settr(59,2,0,0,0,"DO", 1, 2, 0);
	T = T->nxt	= settr(59,2,19,0,0,"DO", 1, 2, 0);
	    T->nxt	= settr(59,2,20,0,0,"DO", 1, 2, 0);
	trans[1][19]	= settr(56,2,22,14,14,"out[w]?_", 1, 503, 0);
	trans[1][20]	= settr(57,0,101,15,15,"(empty(out[w]))", 1, 1003, 0); /* m: 29 -> 101,0 */
	reached1[29] = 1;
	trans[1][21]	= settr(58,2,29,1,0,"goto :b3", 1, 2, 0); /* m: 29 -> 0,101 */
	reached1[29] = 1;
	trans[1][24]	= settr(61,2,29,1,0,"break", 1, 2, 0);
	trans[1][29]	= settr(66,0,101,16,16,".(goto)", 1, 2, 0); /* m: 30 -> 0,101 */
	reached1[30] = 1;
	trans[1][26]	= settr(63,2,27,2,0,"else", 1, 2, 0);
	trans[1][27]	= settr(64,0,101,17,17,"(1)", 1, 2, 0); /* m: 29 -> 101,0 */
	reached1[29] = 1;
	trans[1][30]	= settr(0,0,0,0,0,"confirming[w] = 1",0,0,0);
	T = trans[ 1][36] = settr(73,2,0,0,0,"ATOMIC", 1, 2, 0);
	T->nxt	= settr(73,2,33,0,0,"ATOMIC", 1, 3, 0);
	trans[1][33]	= settr(70,2,34,18,0,"(((((((connected[w]&&!(confirming[w]))&&(epoch[w]>0))&&(n[w]<2))&&(len(out[w])<2))&&(now<((base[w]+7)-1)))&&1))", 1, 3, 0);
	trans[1][34]	= settr(71,0,101,19,19,"out[w]!((epoch[w]*16)+n[w])", 1, 3, 0); /* m: 35 -> 101,0 */
	reached1[35] = 1;
	trans[1][35]	= settr(0,0,0,0,0,"n[w] = (n[w]+1)",0,0,0);
	T = trans[ 1][71] = settr(108,2,0,0,0,"ATOMIC", 1, 2, 0);
	T->nxt	= settr(108,2,37,0,0,"ATOMIC", 1, 503, 0);
	trans[1][37]	= settr(74,2,69,20,0,"(((len(out[w])>0)&&connected[w]))", 1, 503, 0);
	T = trans[1][69] = settr(106,2,0,0,0,"IF", 1, 503, 0);
	T = T->nxt	= settr(106,2,38,0,0,"IF", 1, 503, 0);
	    T->nxt	= settr(106,2,44,0,0,"IF", 1, 503, 0);
	trans[1][38]	= settr(75,2,39,21,0,"(alive[w])", 1, 503, 0);
	trans[1][39]	= settr(76,2,43,22,22,"out[w]?x", 1, 503, 0);
	T = trans[ 1][43] = settr(80,0,0,0,0,"sub-sequence", 1, 503, 0);
	T->nxt	= settr(80,0,40,0,0,"sub-sequence", 1, 503, 0);
	trans[1][40]	= settr(77,0,101,23,23,"assert((x>highest))", 1, 503, 0); /* m: 41 -> 0,101 */
	reached1[41] = 1;
	trans[1][41]	= settr(0,0,0,0,0,"highest = x",0,0,0);
	trans[1][42]	= settr(0,0,0,0,0,"lastRecv[w] = now",0,0,0);
	trans[1][70]	= settr(107,0,101,24,24,".(goto)", 1, 503, 0);
	trans[1][44]	= settr(81,2,68,2,0,"else", 1, 503, 0);
	T = trans[ 1][68] = settr(105,0,0,0,0,"sub-sequence", 1, 503, 0);
	T->nxt	= settr(105,0,45,0,0,"sub-sequence", 1, 503, 0);
	trans[1][45]	= settr(82,2,53,25,25,"connected[w] = 0", 1, 503, 0);
	T = trans[1][53] = settr(90,2,0,0,0,"IF", 1, 503, 0);
	T = T->nxt	= settr(90,2,46,0,0,"IF", 1, 503, 0);
	    T->nxt	= settr(90,2,51,0,0,"IF", 1, 503, 0);
	trans[1][46]	= settr(83,2,50,26,0,"(alive[w])", 1, 503, 0);
	T = trans[ 1][50] = settr(87,0,0,0,0,"sub-sequence", 1, 503, 0);
	T->nxt	= settr(87,0,47,0,0,"sub-sequence", 1, 503, 0);
	trans[1][47]	= settr(84,2,65,27,27,"alive[w] = 0", 1, 503, 0); /* m: 48 -> 0,65 */
	reached1[48] = 1;
	trans[1][48]	= settr(0,0,0,0,0,"willPending[w] = 1",0,0,0);
	trans[1][49]	= settr(0,0,0,0,0,"willSeen[w] = 1",0,0,0);
	trans[1][54]	= settr(91,2,65,1,0,".(goto)", 1, 503, 0);
	trans[1][51]	= settr(88,2,52,2,0,"else", 1, 503, 0);
	trans[1][52]	= settr(89,2,65,1,0,"(1)", 1, 503, 0);
	T = trans[1][65] = settr(102,2,0,0,0,"IF", 1, 503, 0);
	T = T->nxt	= settr(102,2,55,0,0,"IF", 1, 503, 0);
	    T->nxt	= settr(102,2,63,0,0,"IF", 1, 503, 0);
	trans[1][55]	= settr(92,2,62,1,0,"(1)", 1, 503, 0);
	T = trans[ 1][62] = settr(99,0,0,0,0,"sub-sequence", 1, 503, 0);
	T->nxt	= settr(99,0,59,0,0,"sub-sequence", 1, 503, 0);
	trans[1][60]	= settr(97,2,59,1,0,".(goto)", 1, 503, 0);
	T = trans[1][59] = settr(96,2,0,0,0,"DO", 1, 503, 0);
	T = T->nxt	= settr(96,2,56,0,0,"DO", 1, 503, 0);
	    T->nxt	= settr(96,2,57,0,0,"DO", 1, 503, 0);
	trans[1][56]	= settr(93,2,59,28,28,"out[w]?_", 1, 503, 0);
	trans[1][57]	= settr(94,0,101,29,29,"(empty(out[w]))", 1, 503, 0); /* m: 67 -> 101,0 */
	reached1[67] = 1;
	trans[1][58]	= settr(95,2,67,1,0,"goto :b4", 1, 503, 0); /* m: 67 -> 0,101 */
	reached1[67] = 1;
	trans[1][61]	= settr(98,2,67,1,0,"break", 1, 503, 0);
	trans[1][66]	= settr(103,2,67,1,0,".(goto)", 1, 503, 0); /* m: 67 -> 0,101 */
	reached1[67] = 1;
	trans[1][63]	= settr(100,2,64,2,0,"else", 1, 503, 0);
	trans[1][64]	= settr(101,0,101,30,30,"(1)", 1, 503, 0); /* m: 67 -> 101,0 */
	reached1[67] = 1;
	trans[1][67]	= settr(104,0,101,31,31,"confirming[w] = 1", 1, 503, 0); /* m: 70 -> 0,101 */
	reached1[70] = 1;
	T = trans[ 1][77] = settr(114,2,0,0,0,"ATOMIC", 1, 2, 0);
	T->nxt	= settr(114,2,72,0,0,"ATOMIC", 1, 2, 0);
	trans[1][72]	= settr(109,0,101,32,32,"((!(connected[w])&&!(alive[w])))", 1, 2, 0); /* m: 73 -> 101,0 */
	reached1[73] = 1;
	trans[1][73]	= settr(0,0,0,0,0,"connected[w] = 1",0,0,0);
	trans[1][74]	= settr(0,0,0,0,0,"alive[w] = 1",0,0,0);
	trans[1][75]	= settr(0,0,0,0,0,"lastRecv[w] = now",0,0,0);
	trans[1][76]	= settr(0,0,0,0,0,"base[w] = now",0,0,0);
	T = trans[ 1][88] = settr(125,2,0,0,0,"ATOMIC", 1, 2, 0);
	T->nxt	= settr(125,2,78,0,0,"ATOMIC", 1, 2, 0);
	trans[1][78]	= settr(115,2,83,33,0,"(((connected[w]&&alive[w])&&confirming[w]))", 1, 2, 0);
	T = trans[1][83] = settr(120,2,0,0,0,"IF", 1, 2, 0);
	T = T->nxt	= settr(120,2,79,0,0,"IF", 1, 2, 0);
	    T->nxt	= settr(120,2,81,0,0,"IF", 1, 2, 0);
	trans[1][79]	= settr(116,0,101,34,34,"(willSeen[w])", 1, 2, 0); /* m: 80 -> 101,0 */
	reached1[80] = 1;
	trans[1][80]	= settr(0,0,0,0,0,"epoch[w] = 0",0,0,0);
	trans[1][84]	= settr(121,2,85,1,0,".(goto)", 1, 2, 0); /* m: 85 -> 0,101 */
	reached1[85] = 1;
	trans[1][81]	= settr(118,2,82,2,0,"else", 1, 2, 0);
	trans[1][82]	= settr(119,0,101,35,35,"(1)", 1, 2, 0); /* m: 85 -> 101,0 */
	reached1[85] = 1;
	trans[1][85]	= settr(122,0,101,36,36,"willPending[(1-w)] = (willPending[(1-w)]&&!(alive[(1-w)]))", 1, 2, 0); /* m: 86 -> 0,101 */
	reached1[86] = 1;
	trans[1][86]	= settr(0,0,0,0,0,"willSeen[w] = 0",0,0,0);
	trans[1][87]	= settr(0,0,0,0,0,"confirming[w] = 0",0,0,0);
	T = trans[ 1][100] = settr(137,2,0,0,0,"ATOMIC", 1, 2, 0);
	T->nxt	= settr(137,2,89,0,0,"ATOMIC", 1, 2, 0);
	trans[1][89]	= settr(126,2,98,37,37,"((((connected[w]&&alive[w])&&!(confirming[w]))&&willPending[(1-w)]))", 1, 2, 0); /* m: 90 -> 98,0 */
	reached1[90] = 1;
	trans[1][90]	= settr(0,0,0,0,0,"willPending[(1-w)] = 0",0,0,0);
	T = trans[1][98] = settr(135,2,0,0,0,"IF", 1, 2, 0);
	T = T->nxt	= settr(135,2,91,0,0,"IF", 1, 2, 0);
	    T->nxt	= settr(135,2,96,0,0,"IF", 1, 2, 0);
	trans[1][91]	= settr(128,0,101,38,38,"(((holder0==(w==1))&&(epoch[w]==0)))", 1, 2, 0); /* m: 92 -> 101,0 */
	reached1[92] = 1;
	trans[1][92]	= settr(0,0,0,0,0,"epoch[w] = (rideEpoch+1)",0,0,0);
	trans[1][93]	= settr(0,0,0,0,0,"rideEpoch = epoch[w]",0,0,0);
	trans[1][94]	= settr(0,0,0,0,0,"n[w] = 0",0,0,0);
	trans[1][95]	= settr(0,0,0,0,0,"holder0 = (w==0)",0,0,0);
	trans[1][99]	= settr(136,0,101,39,39,".(goto)", 1, 2, 0);
	trans[1][96]	= settr(133,2,97,2,0,"else", 1, 2, 0);
	trans[1][97]	= settr(134,0,101,40,40,"(1)", 1, 2, 0); /* m: 99 -> 101,0 */
	reached1[99] = 1;
	trans[1][103]	= settr(140,0,104,1,0,"break", 0, 2, 0);
	trans[1][104]	= settr(141,0,0,41,41,"-end-", 0, 3500, 0);

	/* proctype 0: clock */

	trans[0] = (Trans **) emalloc(39*sizeof(Trans *));

	trans[0][36]	= settr(35,0,35,1,0,".(goto)", 0, 2, 0);
	T = trans[0][35] = settr(34,0,0,0,0,"DO", 0, 2, 0);
	T = T->nxt	= settr(34,0,1,0,0,"DO", 0, 2, 0);
	    T->nxt	= settr(34,0,33,0,0,"DO", 0, 2, 0);
	trans[0][1]	= settr(0,0,32,42,0,"((now<20))", 1, 2, 0);
	T = trans[ 0][32] = settr(31,2,0,0,0,"ATOMIC", 1, 2, 0);
	T->nxt	= settr(31,2,2,0,0,"ATOMIC", 1, 2, 0);
	trans[0][2]	= settr(1,2,29,43,43,"now = (now+1)", 1, 2, 0); /* m: 3 -> 0,29 */
	reached0[3] = 1;
	trans[0][3]	= settr(0,0,0,0,0,"w = 0",0,0,0);
	trans[0][30]	= settr(29,2,29,1,0,".(goto)", 1, 2, 0);
	T = trans[0][29] = settr(28,2,0,0,0,"DO", 1, 2, 0);
	T = T->nxt	= settr(28,2,4,0,0,"DO", 1, 2, 0);
	    T->nxt	= settr(28,2,27,0,0,"DO", 1, 2, 0);
	trans[0][4]	= settr(3,2,12,44,0,"((w<=1))", 1, 2, 0);
	T = trans[0][12] = settr(11,2,0,0,0,"IF", 1, 2, 0);
	T = T->nxt	= settr(11,2,5,0,0,"IF", 1, 2, 0);
	    T->nxt	= settr(11,2,10,0,0,"IF", 1, 2, 0);
	trans[0][5]	= settr(4,2,9,45,0,"((alive[w]&&((now-lastRecv[w])>=7)))", 1, 2, 0);
	T = trans[ 0][9] = settr(8,0,0,0,0,"sub-sequence", 1, 2, 0);
	T->nxt	= settr(8,0,6,0,0,"sub-sequence", 1, 2, 0);
	trans[0][6]	= settr(5,2,24,46,46,"alive[w] = 0", 1, 2, 0); /* m: 7 -> 0,24 */
	reached0[7] = 1;
	trans[0][7]	= settr(0,0,0,0,0,"willPending[w] = 1",0,0,0);
	trans[0][8]	= settr(0,0,0,0,0,"willSeen[w] = 1",0,0,0);
	trans[0][13]	= settr(12,2,24,1,0,".(goto)", 1, 2, 0);
	trans[0][10]	= settr(9,2,11,2,0,"else", 1, 2, 0);
	trans[0][11]	= settr(10,2,24,1,0,"(1)", 1, 2, 0);
	T = trans[0][24] = settr(23,2,0,0,0,"IF", 1, 2, 0);
	T = T->nxt	= settr(23,2,14,0,0,"IF", 1, 2, 0);
	    T->nxt	= settr(23,2,22,0,0,"IF", 1, 2, 0);
	trans[0][14]	= settr(13,2,20,47,47,"(((etcdExp[w]!=0)&&(now>=etcdExp[w])))", 1, 2, 0); /* m: 15 -> 20,0 */
	reached0[15] = 1;
	trans[0][15]	= settr(0,0,0,0,0,"etcdExp[w] = 0",0,0,0);
	T = trans[0][20] = settr(19,2,0,0,0,"IF", 1, 2, 0);
	T = T->nxt	= settr(19,2,16,0,0,"IF", 1, 2, 0);
	    T->nxt	= settr(19,2,18,0,0,"IF", 1, 2, 0);
	trans[0][16]	= settr(15,2,29,48,48,"((owner==w))", 1, 2, 0); /* m: 17 -> 29,0 */
	reached0[17] = 1;
	trans[0][17]	= settr(0,0,0,0,0,"owner = 255",0,0,0);
	trans[0][21]	= settr(20,2,26,1,0,".(goto)", 1, 2, 0); /* m: 26 -> 0,29 */
	reached0[26] = 1;
	trans[0][18]	= settr(17,2,19,2,0,"else", 1, 2, 0);
	trans[0][19]	= settr(18,2,29,49,49,"(1)", 1, 2, 0); /* m: 26 -> 29,0 */
	reached0[26] = 1;
	trans[0][25]	= settr(24,2,26,1,0,".(goto)", 1, 2, 0); /* m: 26 -> 0,29 */
	reached0[26] = 1;
	trans[0][22]	= settr(21,2,23,2,0,"else", 1, 2, 0);
	trans[0][23]	= settr(22,2,29,50,50,"(1)", 1, 2, 0); /* m: 26 -> 29,0 */
	reached0[26] = 1;
	trans[0][26]	= settr(25,2,29,51,51,"w = (w+1)", 1, 2, 0);
	trans[0][27]	= settr(26,2,28,2,0,"else", 1, 2, 0);
	trans[0][28]	= settr(27,2,31,1,0,"goto :b1", 1, 2, 0);
	trans[0][31]	= settr(30,0,35,1,0,"break", 1, 2, 0);
	trans[0][33]	= settr(32,0,38,52,0,"((now>=20))", 1, 2, 0);
	trans[0][34]	= settr(33,0,38,1,0,"goto :b0", 0, 2, 0);
	trans[0][37]	= settr(36,0,38,1,0,"break", 0, 2, 0);
	trans[0][38]	= settr(37,0,0,53,53,"-end-", 0, 3500, 0);
	/* np_ demon: */
	trans[_NP_] = (Trans **) emalloc(3*sizeof(Trans *));
	T = trans[_NP_][0] = settr(9997,0,1,_T5,0,"(np_)", 1,2,0);
	    T->nxt	  = settr(9998,0,0,_T2,0,"(1)",   0,2,0);
	T = trans[_NP_][1] = settr(9999,0,1,_T5,0,"(np_)", 1,2,0);
}

Trans *
settr(	int t_id, int a, int b, int c, int d,
	char *t, int g, int tpe0, int tpe1)
{	Trans *tmp = (Trans *) emalloc(sizeof(Trans));

	tmp->atom  = a&(6|32);	/* only (2|8|32) have meaning */
	if (!g) tmp->atom |= 8;	/* no global references */
	tmp->st    = b;
	tmp->tpe[0] = tpe0;
	tmp->tpe[1] = tpe1;
	tmp->tp    = t;
	tmp->t_id  = t_id;
	tmp->forw  = c;
	tmp->back  = d;
	return tmp;
}

Trans *
cpytr(Trans *a)
{	Trans *tmp = (Trans *) emalloc(sizeof(Trans));

	int i;
	tmp->atom  = a->atom;
	tmp->st    = a->st;
#ifdef HAS_UNLESS
	tmp->e_trans = a->e_trans;
	for (i = 0; i < HAS_UNLESS; i++)
		tmp->escp[i] = a->escp[i];
#endif
	tmp->tpe[0] = a->tpe[0];
	tmp->tpe[1] = a->tpe[1];
	for (i = 0; i < 6; i++)
	{	tmp->qu[i] = a->qu[i];
		tmp->ty[i] = a->ty[i];
	}
	tmp->tp    = (char *) emalloc(strlen(a->tp)+1);
	strcpy(tmp->tp, a->tp);
	tmp->t_id  = a->t_id;
	tmp->forw  = a->forw;
	tmp->back  = a->back;
	return tmp;
}

#ifndef NOREDUCE
int
srinc_set(int n)
{	if (n <= 2) return LOCAL;
	if (n <= 2+  DELTA) return Q_FULL_F; /* 's' or nfull  */
	if (n <= 2+2*DELTA) return Q_EMPT_F; /* 'r' or nempty */
	if (n <= 2+3*DELTA) return Q_EMPT_T; /* empty */
	if (n <= 2+4*DELTA) return Q_FULL_T; /* full  */
	if (n ==   5*DELTA) return GLOBAL;
	if (n ==   6*DELTA) return TIMEOUT_F;
	if (n ==   7*DELTA) return ALPHA_F;
	Uerror("cannot happen srinc_class");
	return BAD;
}
int
srunc(int n, int m)
{	switch(m) {
	case Q_FULL_F: return n-2;
	case Q_EMPT_F: return n-2-DELTA;
	case Q_EMPT_T: return n-2-2*DELTA;
	case Q_FULL_T: return n-2-3*DELTA;
	case ALPHA_F:
	case TIMEOUT_F: return 257; /* non-zero, and > MAXQ */
	}
	Uerror("cannot happen srunc");
	return 0;
}
#endif
int cnt;
#ifdef HAS_UNLESS
int
isthere(Trans *a, int b)
{	Trans *t;
	for (t = a; t; t = t->nxt)
		if (t->t_id == b)
			return 1;
	return 0;
}
#endif
#ifndef NOREDUCE
int
mark_safety(Trans *t) /* for conditional safety */
{	int g = 0, i, j, k;

	if (!t) return 0;
	if (t->qu[0])
		return (t->qu[1])?2:1;	/* marked */

	for (i = 0; i < 2; i++)
	{	j = srinc_set(t->tpe[i]);
		if (j >= GLOBAL && j != ALPHA_F)
			return -1;
		if (j != LOCAL)
		{	k = srunc(t->tpe[i], j);
			if (g == 0
			||  t->qu[0] != k
			||  t->ty[0] != j)
			{	t->qu[g] = k;
				t->ty[g] = j;
				g++;
	}	}	}
	return g;
}
#endif
void
retrans(int n, int m, int is, short srcln[], uchar reach[], uchar lpstate[])
	/* process n, with m states, is=initial state */
{	Trans *T0, *T1, *T2, *T3;
	Trans *T4, *T5; /* t_reverse or has_unless */
	int i;
#if defined(HAS_UNLESS) || !defined(NOREDUCE)
	int k;
#endif
#ifndef NOREDUCE
	int g, h, j, aa;
#endif
#ifdef HAS_UNLESS
	int p;
#endif
	if (state_tables >= 4)
	{	printf("STEP 1 %s\n", 
			procname[n]);
		for (i = 1; i < m; i++)
		for (T0 = trans[n][i]; T0; T0 = T0->nxt)
			crack(n, i, T0, srcln);
		return;
	}
	do {
		for (i = 1, cnt = 0; i < m; i++)
		{	T2 = trans[n][i];
			T1 = T2?T2->nxt:(Trans *)0;
/* prescan: */		for (T0 = T1; T0; T0 = T0->nxt)
/* choice in choice */	{	if (T0->st && trans[n][T0->st]
				&&  trans[n][T0->st]->nxt)
					break;
			}
#if 0
		if (T0)
		printf("\tstate %d / %d: choice in choice\n",
		i, T0->st);
#endif
			if (T0)
			for (T0 = T1; T0; T0 = T0->nxt)
			{	T3 = trans[n][T0->st];
				if (!T3->nxt)
				{	T2->nxt = cpytr(T0);
					T2 = T2->nxt;
					imed(T2, T0->st, n, i);
					continue;
				}
				do {	T3 = T3->nxt;
					T2->nxt = cpytr(T3);
					T2 = T2->nxt;
					imed(T2, T0->st, n, i);
				} while (T3->nxt);
				cnt++;
			}
		}
	} while (cnt);
	if (state_tables >= 3)
	{	printf("STEP 2 %s\n", 
			procname[n]);
		for (i = 1; i < m; i++)
		for (T0 = trans[n][i]; T0; T0 = T0->nxt)
			crack(n, i, T0, srcln);
		return;
	}
	for (i = 1; i < m; i++)
	{	if (trans[n][i] && trans[n][i]->nxt) /* optimize */
		{	T1 = trans[n][i]->nxt;
#if 0
			printf("\t\tpull %d (%d) to %d\n",
			T1->st, T1->forw, i);
#endif
			srcln[i] = srcln[T1->st];	/* Oyvind Teig, 5.2.0 */

			if (!trans[n][T1->st]) continue;
			T0 = cpytr(trans[n][T1->st]);
			trans[n][i] = T0;
			reach[T1->st] = 1;
			imed(T0, T1->st, n, i);
			for (T1 = T1->nxt; T1; T1 = T1->nxt)
			{
#if 0
			printf("\t\tpull %d (%d) to %d\n",
				T1->st, T1->forw, i);
#endif
		/*		srcln[i] = srcln[T1->st];  gh: not useful */
				if (!trans[n][T1->st]) continue;
				T0->nxt = cpytr(trans[n][T1->st]);
				T0 = T0->nxt;
				reach[T1->st] = 1;
				imed(T0, T1->st, n, i);
	}	}	}
	if (state_tables >= 2)
	{	printf("STEP 3 %s\n", 
			procname[n]);
		for (i = 1; i < m; i++)
		for (T0 = trans[n][i]; T0; T0 = T0->nxt)
			crack(n, i, T0, srcln);
		return;
	}
#ifdef HAS_UNLESS
	for (i = 1; i < m; i++)
	{	if (!trans[n][i]) continue;
		/* check for each state i if an
		 * escape to some state p is defined
		 * if so, copy and mark p's transitions
		 * and prepend them to the transition-
		 * list of state i
		 */
	 if (!like_java) /* the default */
	 {	for (T0 = trans[n][i]; T0; T0 = T0->nxt)
		for (k = HAS_UNLESS-1; k >= 0; k--)
		{	if (p = T0->escp[k])
			for (T1 = trans[n][p]; T1; T1 = T1->nxt)
			{	if (isthere(trans[n][i], T1->t_id))
					continue;
				T2 = cpytr(T1);
				T2->e_trans = p;
				T2->nxt = trans[n][i];
				trans[n][i] = T2;
		}	}
	 } else /* outermost unless checked first */
	 {	T4 = T3 = (Trans *) 0;
		for (T0 = trans[n][i]; T0; T0 = T0->nxt)
		for (k = HAS_UNLESS-1; k >= 0; k--)
		{	if (p = T0->escp[k])
			for (T1 = trans[n][p]; T1; T1 = T1->nxt)
			{	if (isthere(trans[n][i], T1->t_id))
					continue;
				T2 = cpytr(T1);
				T2->nxt = (Trans *) 0;
				T2->e_trans = p;
				if (T3)	T3->nxt = T2;
				else	T4 = T2;
				T3 = T2;
		}	}
		if (T4)
		{	T3->nxt = trans[n][i];
			trans[n][i] = T4;
		}
	 }
	}
#endif
#ifndef NOREDUCE
	for (i = 1; i < m; i++)
	{	if (a_cycles)
		{ /* moves through these states are visible */
	#if PROG_LAB>0 && defined(HAS_NP)
			if (progstate[n][i])
				goto degrade;
			for (T1 = trans[n][i]; T1; T1 = T1->nxt)
				if (progstate[n][T1->st])
					goto degrade;
	#endif
			if (accpstate[n][i] || visstate[n][i])
				goto degrade;
			for (T1 = trans[n][i]; T1; T1 = T1->nxt)
				if (accpstate[n][T1->st])
					goto degrade;
		}
		T1 = trans[n][i];
		if (!T1) continue;
		g = mark_safety(T1);	/* V3.3.1 */
		if (g < 0) goto degrade; /* global */
		/* check if mixing of guards preserves reduction */
		if (T1->nxt)
		{	k = 0;
			for (T0 = T1; T0; T0 = T0->nxt)
			{	if (!(T0->atom&8))
					goto degrade;
				for (aa = 0; aa < 2; aa++)
				{	j = srinc_set(T0->tpe[aa]);
					if (j >= GLOBAL && j != ALPHA_F)
						goto degrade;
					if (T0->tpe[aa]
					&&  T0->tpe[aa]
					!=  T1->tpe[0])
						k = 1;
			}	}
			/* g = 0;	V3.3.1 */
			if (k)	/* non-uniform selection */
			for (T0 = T1; T0; T0 = T0->nxt)
			for (aa = 0; aa < 2; aa++)
			{	j = srinc_set(T0->tpe[aa]);
				if (j != LOCAL)
				{	k = srunc(T0->tpe[aa], j);
					for (h = 0; h < 6; h++)
						if (T1->qu[h] == k
						&&  T1->ty[h] == j)
							break;
					if (h >= 6)
					{	T1->qu[g%6] = k;
						T1->ty[g%6] = j;
						g++;
			}	}	}
			if (g > 6)
			{	T1->qu[0] = 0;	/* turn it off */
				printf("pan: warning, line %d, ",
					srcln[i]);
			 	printf("too many stmnt types (%d)",
					g);
			  	printf(" in selection\n");
			  goto degrade;
			}
		}
		/* mark all options global if >=1 is global */
		for (T1 = trans[n][i]; T1; T1 = T1->nxt)
			if (!(T1->atom&8)) break;
		if (T1)
degrade:	for (T1 = trans[n][i]; T1; T1 = T1->nxt)
			T1->atom &= ~8;	/* mark as unsafe */
		/* can only mix 'r's or 's's if on same chan */
		/* and not mixed with other local operations */
		T1 = trans[n][i];
		if (!T1 || T1->qu[0]) continue;
		j = T1->tpe[0];
		if (T1->nxt && T1->atom&8)
		{ if (j == 5*DELTA)
		  {	printf("warning: line %d ", srcln[i]);
			printf("mixed condition ");
			printf("(defeats reduction)\n");
			goto degrade;
		  }
		  for (T0 = T1; T0; T0 = T0->nxt)
		  for (aa = 0; aa < 2; aa++)
		  if  (T0->tpe[aa] && T0->tpe[aa] != j)
		  {	printf("warning: line %d ", srcln[i]);
			printf("[%d-%d] mixed %stion ",
				T0->tpe[aa], j, 
				(j==5*DELTA)?"condi":"selec");
			printf("(defeats reduction)\n");
			printf("	'%s' <-> '%s'\n",
				T1->tp, T0->tp);
			goto degrade;
		} }
	}
#endif
	for (i = 1; i < m; i++)
	{	T2 = trans[n][i];
		if (!T2
		||  T2->nxt
		||  strncmp(T2->tp, ".(goto)", 7)
		||  !stopstate[n][i])
			continue;
		stopstate[n][T2->st] = 1;
	}
	if (state_tables && !verbose)
	{	if (dodot)
		{	char buf[256], *q = buf, *p = procname[n];
			while (*p != '\0')
			{	if (*p != ':')
				{	*q++ = *p;
				}
				p++;
			}
			*q = '\0';
			printf("digraph ");
			switch (Btypes[n]) {
			case I_PROC:  printf("init {\n"); break;
			case N_CLAIM: printf("claim_%s {\n", buf); break;
			case E_TRACE: printf("notrace {\n"); break;
			case N_TRACE: printf("trace {\n"); break;
			default:      printf("p_%s {\n", buf); break;
			}
			printf("size=\"8,10\";\n");
			printf("  GT [shape=box,style=dotted,label=\"%s\"];\n", buf);
			printf("  GT -> S%d;\n", is);
		} else
		{	switch (Btypes[n]) {
			case I_PROC:  printf("init\n"); break;
			case N_CLAIM: printf("claim %s\n", procname[n]); break;
			case E_TRACE: printf("notrace assertion\n"); break;
			case N_TRACE: printf("trace assertion\n"); break;
			default:      printf("proctype %s\n", procname[n]); break;
		}	}
		for (i = 1; i < m; i++)
		{	reach[i] = 1;
		}
		tagtable(n, m, is, srcln, reach);
		if (dodot) printf("}\n");
	} else
	for (i = 1; i < m; i++)
	{	int nrelse;
		if (Btypes[n] != N_CLAIM)
		{	for (T0 = trans[n][i]; T0; T0 = T0->nxt)
			{	if (T0->st == i
				&& strcmp(T0->tp, "(1)") == 0)
				{	printf("error: proctype '%s' ",
						procname[n]);
		  			printf("line %d, state %d: has un",
						srcln[i], i);
					printf("conditional self-loop\n");
					pan_exit(1);
		}	}	}
		nrelse = 0;
		for (T0 = trans[n][i]; T0; T0 = T0->nxt)
		{	if (strcmp(T0->tp, "else") == 0)
				nrelse++;
		}
		if (nrelse > 1)
		{	printf("error: proctype '%s' state",
				procname[n]);
		  	printf(" %d, inherits %d", i, nrelse);
		  	printf(" 'else' stmnts\n");
			pan_exit(1);
	}	}
#if !defined(LOOPSTATE) && !defined(BFS_PAR)
	if (state_tables)
#endif
	do_dfs(n, m, is, srcln, reach, lpstate);

	if (!t_reverse)
	{	return;
	}
	/* process n, with m states, is=initial state -- reverse list */
	if (!state_tables && Btypes[n] != N_CLAIM)
	{	for (i = 1; i < m; i++)
		{	Trans *Tx = (Trans *) 0; /* list of escapes */
			Trans *Ty = (Trans *) 0; /* its tail element */
			T1 = (Trans *) 0; /* reversed list */
			T2 = (Trans *) 0; /* its tail */
			T3 = (Trans *) 0; /* remembers possible 'else' */

			/* find unless-escapes, they should go first */
			T4 = T5 = T0 = trans[n][i];
	#ifdef HAS_UNLESS
			while (T4 && T4->e_trans) /* escapes are first in orig list */
			{	T5 = T4;	  /* remember predecessor */
				T4 = T4->nxt;
			}
	#endif
			/* T4 points to first non-escape, T5 to its parent, T0 to original list */
			if (T4 != T0)		 /* there was at least one escape */
			{	T3 = T5->nxt;		 /* start of non-escapes */
				T5->nxt = (Trans *) 0;	 /* separate */
				Tx = T0;		 /* start of the escapes */
				Ty = T5;		 /* its tail */
				T0 = T3;		 /* the rest, to be reversed */
			}
			/* T0 points to first non-escape, Tx to the list of escapes, Ty to its tail */

			/* first tail-add non-escape transitions, reversed */
			T3 = (Trans *) 0;
			for (T5 = T0; T5; T5 = T4)
			{	T4 = T5->nxt;
	#ifdef HAS_UNLESS
				if (T5->e_trans)
				{	printf("error: cannot happen!\n");
					continue;
				}
	#endif
				if (strcmp(T5->tp, "else") == 0)
				{	T3 = T5;
					T5->nxt = (Trans *) 0;
				} else
				{	T5->nxt = T1;
					if (!T1) { T2 = T5; }
					T1 = T5;
			}	}
			/* T3 points to a possible else, which is removed from the list */
			/* T1 points to the reversed list so far (without escapes) */
			/* T2 points to the tail element -- where the else should go */
			if (T2 && T3)
			{	T2->nxt = T3;	/* add else */
			} else
			{	if (T3) /* there was an else, but there's no tail */
				{	if (!T1)	/* and no reversed list */
					{	T1 = T3; /* odd, but possible */
					} else		/* even stranger */
					{	T1->nxt = T3;
			}	}	}

			/* add in the escapes, to that they appear at the front */
			if (Tx && Ty) { Ty->nxt = T1; T1 = Tx; }

			trans[n][i] = T1;
			/* reversed, with escapes first and else last */
	}	}
	if (state_tables && verbose)
	{	printf("FINAL proctype %s\n", 
			procname[n]);
		for (i = 1; i < m; i++)
		for (T0 = trans[n][i]; T0; T0 = T0->nxt)
			crack(n, i, T0, srcln);
	}
}
void
imed(Trans *T, int v, int n, int j)	/* set intermediate state */
{	progstate[n][T->st] |= progstate[n][v];
	accpstate[n][T->st] |= accpstate[n][v];
	stopstate[n][T->st] |= stopstate[n][v];
	mapstate[n][j] = T->st;
}
void
tagtable(int n, int m, int is, short srcln[], uchar reach[])
{	Trans *z;

	if (is >= m || !trans[n][is]
	||  is <= 0 || reach[is] == 0)
		return;
	reach[is] = 0;
	if (state_tables)
	for (z = trans[n][is]; z; z = z->nxt)
	{	if (dodot)
			dot_crack(n, is, z);
		else
			crack(n, is, z, srcln);
	}

	for (z = trans[n][is]; z; z = z->nxt)
	{
#ifdef HAS_UNLESS
		int i, j;
#endif
		tagtable(n, m, z->st, srcln, reach);
#ifdef HAS_UNLESS
		for (i = 0; i < HAS_UNLESS; i++)
		{	j = trans[n][is]->escp[i];
			if (!j) break;
			tagtable(n, m, j, srcln, reach);
		}
#endif
	}
}

extern Trans *t_id_lkup[];

void
dfs_table(int n, int m, int is, short srcln[], uchar reach[], uchar lpstate[])
{	Trans *z;

	if (is >= m || is <= 0 || !trans[n][is])
		return;
	if ((reach[is] & (4|8|16)) != 0)
	{	if ((reach[is] & (8|16)) == 16)	/* on stack, not yet recorded */
		{	lpstate[is] = 1;
			reach[is] |= 8; /* recorded */
			if (state_tables && verbose)
			{	printf("state %d line %d is a loopstate\n", is, srcln[is]);
		}	}
		return;
	}
	reach[is] |= (4|16);	/* visited | onstack */
	for (z = trans[n][is]; z; z = z->nxt)
	{	t_id_lkup[z->t_id] = z;
#ifdef HAS_UNLESS
		int i, j;
#endif
		dfs_table(n, m, z->st, srcln, reach, lpstate);
#ifdef HAS_UNLESS
		for (i = 0; i < HAS_UNLESS; i++)
		{	j = trans[n][is]->escp[i];
			if (!j) break;
			dfs_table(n, m, j, srcln, reach, lpstate);
		}
#endif
	}
	reach[is] &= ~16; /* no longer on stack */
}
void
do_dfs(int n, int m, int is, short srcln[], uchar reach[], uchar lpstate[])
{	int i;
	dfs_table(n, m, is, srcln, reach, lpstate);
	for (i = 0; i < m; i++)
		reach[i] &= ~(4|8|16);
}
void
crack(int n, int j, Trans *z, short srcln[])
{	int i;

	if (!z) return;
	printf("	state %3d -(tr %3d)-> state %3d  ",
		j, z->forw, z->st);
	printf("[id %3d tp %3d", z->t_id, z->tpe[0]);
	if (z->tpe[1]) printf(",%d", z->tpe[1]);
#ifdef HAS_UNLESS
	if (z->e_trans)
		printf(" org %3d", z->e_trans);
	else if (state_tables >= 2)
	for (i = 0; i < HAS_UNLESS; i++)
	{	if (!z->escp[i]) break;
		printf(" esc %d", z->escp[i]);
	}
#endif
	printf("]");
	printf(" [%s%s%s%s%s] %s:%d => ",
		z->atom&6?"A":z->atom&32?"D":"-",
		accpstate[n][j]?"a" :"-",
		stopstate[n][j]?"e" : "-",
		progstate[n][j]?"p" : "-",
		z->atom & 8 ?"L":"G",
		PanSource, srcln[j]);
	for (i = 0; z->tp[i]; i++)
		if (z->tp[i] == '\n')
			printf("\\n");
		else
			putchar(z->tp[i]);
	if (verbose && z->qu[0])
	{	printf("\t[");
		for (i = 0; i < 6; i++)
			if (z->qu[i])
				printf("(%d,%d)",
				z->qu[i], z->ty[i]);
		printf("]");
	}
	printf("\n");
	fflush(stdout);
}
/* spin -a m.pml; cc -o pan pan.c; ./pan -D | dot -Tps > foo.ps; ps2pdf foo.ps */
void
dot_crack(int n, int j, Trans *z)
{	int i;

	if (!z) return;
	printf("	S%d -> S%d  [color=black", j, z->st);

	if (z->atom&6) printf(",style=dashed");
	else if (z->atom&32) printf(",style=dotted");
	else if (z->atom&8) printf(",style=solid");
	else printf(",style=bold");

	printf(",label=\"");
	for (i = 0; z->tp[i]; i++)
	{	if (z->tp[i] == '\\'
		&&  z->tp[i+1] == 'n')
		{	i++; printf(" ");
		} else
		{	putchar(z->tp[i]);
	}	}
	printf("\"];\n");
	if (accpstate[n][j]) printf("  S%d [color=red,style=bold];\n", j);
	else if (progstate[n][j]) printf("  S%d [color=green,style=bold];\n", j);
	if (stopstate[n][j]) printf("  S%d [color=blue,style=bold,shape=box];\n", j);
}

#ifdef VAR_RANGES
#define BYTESIZE	32	/* 2^8 : 2^3 = 256:8 = 32 */

typedef struct Vr_Ptr {
	char	*nm;
	uchar	vals[BYTESIZE];
	struct Vr_Ptr *nxt;
} Vr_Ptr;
Vr_Ptr *ranges = (Vr_Ptr *) 0;

void
logval(char *s, int v)
{	Vr_Ptr *tmp;

	if (v<0 || v > 255) return;
	for (tmp = ranges; tmp; tmp = tmp->nxt)
		if (!strcmp(tmp->nm, s))
			goto found;
	tmp = (Vr_Ptr *) emalloc(sizeof(Vr_Ptr));
	tmp->nxt = ranges;
	ranges = tmp;
	tmp->nm = s;
found:
	tmp->vals[(v)/8] |= 1<<((v)%8);
}

void
dumpval(uchar X[], int range)
{	int w, x, i, j = -1;

	for (w = i = 0; w < range; w++)
	for (x = 0; x < 8; x++, i++)
	{
from:		if ((X[w] & (1<<x)))
		{	printf("%d", i);
			j = i;
			goto upto;
	}	}
	return;
	for (w = 0; w < range; w++)
	for (x = 0; x < 8; x++, i++)
	{
upto:		if (!(X[w] & (1<<x)))
		{	if (i-1 == j)
				printf(", ");
			else
				printf("-%d, ", i-1);
			goto from;
	}	}
	if (j >= 0 && j != 255)
		printf("-255");
}

void
dumpranges(void)
{	Vr_Ptr *tmp;
	printf("\nValues assigned within ");
	printf("interval [0..255]:\n");
	for (tmp = ranges; tmp; tmp = tmp->nxt)
	{	printf("\t%s\t: ", tmp->nm);
		dumpval(tmp->vals, BYTESIZE);
		printf("\n");
	}
}
#endif
