(function(){
'use strict';
const T0=performance.now(),D=JSON.parse(document.getElementById('hbm-data').textContent),T1=performance.now();
const $=id=>document.getElementById(id);
const U=['B','KiB','MiB','GiB','TiB'];
function sz(b){let i=0,v=b;while(v>=1024&&i<U.length-1){v/=1024;i++;}return (i?v.toFixed(2):v)+U[i];}
function esc(s){return String(s).replace(/[&<>"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));}
function hex(a){return a<0?'?':'0x'+a.toString(16);}
const PAL=['#4e79a7','#59a14f','#e15759','#76b7b2','#edc949','#af7aa1','#ff9da7','#9c755f','#f28e2c','#bab0ab'];
const OTHER='#c9ced8',SEL='#d62728';
function rgb(h){const n=parseInt(h.slice(1),16);return [n>>16&255,n>>8&255,n&255];}
function u32(h){const c=rgb(h);return (255<<24|c[2]<<16|c[1]<<8|c[0])>>>0;}
const PAL32=PAL.map(u32),OTHER32=u32(OTHER),SEL32=u32(SEL),WHITE32=u32('#ffffff'),HA32=u32('#9aa1ad'),HB32=u32('#d9dce2');
/* colours by op for the blocks at the peak, in order of first appearance */
const COL={};function color(s){if(!(s in COL))COL[s]=PAL[Object.keys(COL).length%PAL.length];return COL[s];}
const tip=$('tip');
function showTip(e,text){tip.textContent=text;tip.style.display='block';
tip.style.left=Math.max(4,Math.min(e.clientX+14,innerWidth-tip.offsetWidth-8))+'px';
tip.style.top=Math.min(e.clientY+14,innerHeight-tip.offsetHeight-4)+'px';}
function hideTip(){tip.style.display='none';}
document.title='hbm view: '+D.title;
$('title').textContent=D.title;

/* ---- one device's data, prepared once ---- */
let V=null;
function prep(d){
if(d._p)return d._p;
const C=d.cols,nb=C.e.length,B=d.blocks,m=B.s.length;
const S=new Float64Array(m),E=new Float64Array(m);let acc=0;
for(let i=0;i<m;i++){acc+=B.s[i];S[i]=acc;E[i]=acc+B.d[i];}
const band=new Int32Array(m).fill(-1);B.k.forEach((j,q)=>{band[j]=q;});
let ymax=1;for(let c=0;c<nb;c++){if(C.u[c]>ymax)ymax=C.u[c];if(C.r[c]>ymax)ymax=C.r[c];}
return d._p={d,C,nb,from:C.from,n:C.n,N0:C.from,N1:C.from+C.n,hs:d.history_start,B,m,S,E,Z:B.z,A:B.a,G:B.g,K:B.k,ST:B.st,STK:B.stacks,band,ymax};
}
/* what an event is called: numbers count from the history's first event */
function evl(i){if(V.d.steps){const s=V.d.steps[Math.max(0,Math.min(i,V.d.steps.length-1))],nm=V.d.step_names[s];return 'step '+s+(nm?' ('+nm+')':'');}
return i<V.hs?'before the history':'event '+(i-V.hs);}
function bucketOf(e){const n=V.n,nb=V.nb;if(!nb)return -1;let c=Math.ceil((e-V.from+1)*nb/n)-1;return Math.max(0,Math.min(nb-1,c));}
/* the time of event i, only when the trace has times and i is a column's event */
function timeOf(i){if(!V.d.has_time||!V.C.t||i<V.hs)return null;const c=bucketOf(i);return c>=0&&V.C.e[c]===i?V.C.t[c]:null;}
function evt(i){const t=timeOf(i);return evl(i)+(t!==null&&t!==undefined?' ('+t.toFixed(6)+'s)':'');}
function tagOf(j){return V.d.tags[V.G[j]]||['','','','',''];}
function life(j){const a=V.S[j],b=V.E[j],q=V.band[j];let s=evl(a)+' .. '+(b>=V.N1?'the end (never freed)':evl(b));
if(V.d.has_time&&q>=0&&V.B.ts){const ta=V.B.ts[q],tb=V.B.te[q];if(ta!==null||tb!==null)s+='\n          ('+(ta!==null?ta.toFixed(6)+'s':'start')+' .. '+(tb!==null?tb.toFixed(6)+'s':'end')+')';}
return s;}
function oomText(ev){const o=V.d.oom_events.find(o=>o[0]===ev);return o?'\nOOM: tried to allocate '+sz(o[1])+(o[2]?'; the device had '+sz(o[2])+' free':''):'';}
function stackOf(j){if(!V.ST)return '';if(!V.kpos){V.kpos=new Map();V.K.forEach((b,i)=>V.kpos.set(b,i));}const q=V.kpos.get(j);
const s=q===undefined?null:V.STK[V.ST[q]];return s&&s.length?'\nstack:\n  '+s.join('\n  '):'';}
function blockText(j){const g=tagOf(j);return sz(V.Z[j])+(V.S[j]<V.hs?'   (live before the history)':'')+'\nlifetime: '+life(j)+'\nop:       '+(g[0]||g[3]||'(untagged)')+
(g[3]&&g[3]!==g[0]?'\nlabel:    '+g[3]:'')+(g[1]?'\nshape:    '+g[1]:'')+'\nsource:   '+(g[2]||'-')+(g[4]?'\ncategory: '+g[4]:'')+'\naddress:  '+hex(V.A[j])+stackOf(j);}

/* ---- device selector ---- */
const dsel=$('device');
dsel.innerHTML=D.devices.map((d,i)=>'<option value="'+i+'">'+esc((d.device||'device '+i)+' \u00b7 peak '+sz(d.peak.bytes)+(d.ooms?' \u00b7 '+d.ooms+' OOM':''))+'</option>').join('');
dsel.addEventListener('change',()=>setDevice(+dsel.value));

/* ---- timeline ---- */
const cv=$('timeline'),cx=cv.getContext('2d'),ov=$('overlay'),ox=ov.getContext('2d');
const PAD={l:74,r:14,t:12,b:34};
let x0=0,x1=1,hi=null,selBand=-1,hovBand=-1,selEvent=-1,G={};
function X(v){return PAD.l+(v-x0)/(x1-x0)*(G.w-PAD.l-PAD.r);}
function Y(v){return G.h-PAD.b-v/V.ymax*(G.h-PAD.t-PAD.b);}
function render(){
const r=cv.getBoundingClientRect(),dpr=devicePixelRatio||1;
cv.width=Math.max(1,Math.round(r.width*dpr));cv.height=Math.max(1,Math.round(r.height*dpr));ov.width=cv.width;ov.height=cv.height;
G={w:r.width,h:r.height,dpr};cx.setTransform(1,0,0,1,0,0);cx.clearRect(0,0,cv.width,cv.height);
const pl=Math.round(PAD.l*dpr),pt=Math.round(PAD.t*dpr),pw=Math.max(1,cv.width-pl-Math.round(PAD.r*dpr)),ph=Math.max(1,cv.height-pt-Math.round(PAD.b*dpr));
G.pl=pl;G.pt=pt;G.pw=pw;G.ph=ph;
const rep=new Float64Array(pw).fill(-1),cb=new Int32Array(pw).fill(-1),res=new Float64Array(pw);
G.rep=rep;G.cb=cb;G.res=res;
const img=cx.createImageData(pw,ph),px=new Uint32Array(img.data.buffer);px.fill(WHITE32);
const sc=ph/V.ymax,C=V.C,K=V.K,S=V.S,E=V.E,Z=V.Z;
const drawn=new Set(),hatched=new Set();let kp=0,act=[];
for(let x=0;x<pw&&V.nb;x++){
const ea=x0+x*(x1-x0)/pw,eb=x0+(x+1)*(x1-x0)/pw;
if(eb<=V.N0||ea>=V.N1)continue;
const fa=Math.max(V.N0,Math.floor(ea)),cA=bucketOf(fa),cB=bucketOf(Math.min(V.N1-1,Math.max(fa,Math.ceil(eb)-1)));
let best=cA,rm=0;for(let c=cA;c<=cB;c++){if(C.u[c]>C.u[best])best=c;if(C.r[c]>rm)rm=C.r[c];}
const e=C.e[best];rep[x]=e;cb[x]=best;res[x]=rm;
while(kp<K.length&&S[K[kp]]<=e)act.push(K[kp++]);
let stale=false;for(let q=0;q<act.length;q++)if(E[act[q]]<=e){stale=true;break;}
if(stale)act=act.filter(j=>E[j]>e);
let off=0,y0=ph;
for(let q=0;q<act.length;q++){const j=act[q];off+=Z[j];const y1=Math.max(0,Math.round(ph-off*sc));
if(y1<y0){const before=S[j]<V.hs,hl=j===selBand||j===hovBand,c32=hl?SEL32:PAL32[V.band[j]%PAL32.length];
for(let y=y1;y<y0;y++)px[y*pw+x]=hl?c32:before?(((x+y)&7)<3?HA32:HB32):c32;
if(!hl&&!before&&y0-y1>=4)px[y1*pw+x]=PAL32[(V.band[j]+5)%PAL32.length];
drawn.add(j);if(before)hatched.add(j);y0=y1;}}
const top=Math.max(0,Math.round(ph-C.u[best]*sc));for(let y=top;y<y0;y++)px[y*pw+x]=OTHER32;}
cx.putImageData(img,pl,pt);
G.drawn=drawn.size;G.hatched=hatched.size;
cx.setTransform(dpr,0,0,dpr,0,0);const w=G.w,h=G.h;
cx.font='11px sans-serif';cx.fillStyle='#5b6475';cx.strokeStyle='rgba(0,0,0,.08)';cx.lineWidth=1;
for(let i=0;i<=4;i++){const v=V.ymax*i/4,y=Y(v);cx.beginPath();cx.moveTo(PAD.l,y);cx.lineTo(w-PAD.r,y);cx.stroke();cx.fillText(sz(Math.round(v)),4,y+4);}
/* x axis: ticks at column events, so a time shown is that event's own */
const labels=[];let last=-1;
if(V.nb)for(let i=0;i<=6;i++){const v=x0+(x1-x0)*i/6,e=Math.min(V.N1-1,Math.max(V.N0,Math.floor(v))),c=bucketOf(e),te=V.C.e[c];if(te===last)continue;last=te;
const xx=Math.min(w-PAD.r,Math.max(PAD.l,X(te+0.5)));cx.textAlign=i?(i<6?'center':'right'):'left';
const l1=V.d.steps?'step '+V.d.steps[te]:te<V.hs?'before the history':'event '+(te-V.hs),tt=timeOf(te),l2=tt!==null&&tt!==undefined?tt.toFixed(4)+'s':'';
if(V.d.steps&&labels.indexOf(l1)>=0)continue; /* several events of one step: one label */
cx.fillText(l1,xx,h-20);if(l2)cx.fillText(l2,xx,h-7);labels.push(l1+(l2?' '+l2:''));}
cx.textAlign='left';document.body.dataset.axis=labels.join('|');
cx.save();cx.beginPath();cx.rect(PAD.l,0,w-PAD.l-PAD.r,h);cx.clip();
/* reserved: the highest of each column */
cx.beginPath();let started=false;for(let x=0;x<pw;x++){if(rep[x]<0)continue;const xx=PAD.l+x/dpr,yy=Y(res[x]);if(!started){cx.moveTo(xx,yy);started=true;}else cx.lineTo(xx,yy);}
cx.strokeStyle='#f28e2c';cx.lineWidth=1.5;cx.stroke();
if(V.hs>0&&V.hs>=x0&&V.hs<=x1){const hx=X(V.hs);cx.strokeStyle='#5b6475';cx.setLineDash([2,3]);cx.beginPath();cx.moveTo(hx,PAD.t);cx.lineTo(hx,h-PAD.b);cx.stroke();cx.setLineDash([]);
cx.fillStyle='#5b6475';cx.fillText('history starts',hx+3,PAD.t+22);}
const pe=V.d.peak.event;if(V.nb&&pe>=x0&&pe<=x1){const p=X(pe+0.5);cx.strokeStyle='#e15759';cx.setLineDash([4,3]);cx.beginPath();cx.moveTo(p,PAD.t);cx.lineTo(p,h-PAD.b);cx.stroke();cx.setLineDash([]);cx.fillStyle='#e15759';cx.fillText('peak',p+3,PAD.t+10);}
cx.fillStyle='#b00020';V.d.oom_events.forEach(o=>{if(o[0]<x0||o[0]>x1)return;const p=X(o[0]+0.5);cx.beginPath();cx.moveTo(p-5,PAD.t);cx.lineTo(p+5,PAD.t);cx.lineTo(p,PAD.t+8);cx.fill();});
if(selEvent>=0&&selEvent>=x0&&selEvent<=x1){const p=X(selEvent+0.5);cx.strokeStyle='#1f5fbf';cx.lineWidth=2;cx.beginPath();cx.moveTo(p,PAD.t);cx.lineTo(p,h-PAD.b);cx.stroke();}
cx.restore();
document.body.dataset.bands=G.drawn;document.body.dataset.hatched=G.hatched;document.body.dataset.plot=[r.left+scrollX+PAD.l,r.top+scrollY+PAD.t,r.width-PAD.l-PAD.r,r.height-PAD.t-PAD.b].map(Math.round).join(',');
overlay(null);}
let mouse=null;
function overlay(){ox.setTransform(G.dpr,0,0,G.dpr,0,0);ox.clearRect(0,0,G.w,G.h);
if(hi){ox.fillStyle='rgba(237,201,73,.30)';const a=X(hi[0]),b=X(hi[1]);ox.fillRect(Math.max(PAD.l,a),PAD.t,Math.max(2,Math.min(G.w-PAD.r,b)-Math.max(PAD.l,a)),G.h-PAD.t-PAD.b);}
if(mouse!==null&&mouse>=PAD.l){ox.strokeStyle='#1d2330';ox.lineWidth=1;ox.beginPath();ox.moveTo(mouse,PAD.t);ox.lineTo(mouse,G.h-PAD.b);ox.stroke();}}
/* what is under the mouse: the column's event and the band (or the folded rest) */
function hit(e){const r=cv.getBoundingClientRect(),x=Math.floor((e.clientX-r.left)*G.dpr)-G.pl;
if(x<0||x>=G.pw||G.rep[x]<0)return null;const ev=G.rep[x],c=G.cb[x],v=(G.ph-((e.clientY-r.top)*G.dpr-G.pt))/(G.ph/V.ymax);
let off=0,band=-1,live=0,lb=0;for(const j of V.K){if(V.S[j]<=ev&&ev<V.E[j]){live++;lb+=V.Z[j];if(band<0&&v>=off&&v<off+V.Z[j])band=j;off+=V.Z[j];}}
return {ev,c,band,other:band<0&&v>=off&&v<=V.C.u[c],live,lb,x};}
function evAt(clientX){const r=cv.getBoundingClientRect();return x0+(clientX-r.left-PAD.l)/(r.width-PAD.l-PAD.r)*(x1-x0);}
function clampView(a,b){const N0=V.N0,N1=Math.max(V.N1,V.N0+1);if(b-a>N1-N0){a=N0;b=N1;}if(a<N0){b+=N0-a;a=N0;}if(b>N1){a-=b-N1;b=N1;}x0=Math.max(N0,a);x1=b;}
function resetView(){x0=V.N0;x1=Math.max(V.N1,V.N0+1);}
let drag=null;
cv.addEventListener('wheel',e=>{e.preventDefault();const c=evAt(e.clientX),k=e.deltaY<0?0.8:1.25;
const a=c-(c-x0)*k,b=c+(x1-c)*k;if(b-a<Math.min(4,(V.N1-V.N0)/8))return;clampView(a,b);render();},{passive:false});
cv.addEventListener('mousedown',e=>{drag={x:e.clientX,a:x0,b:x1,moved:false};});
addEventListener('mouseup',e=>{if(drag&&!drag.moved&&e.target===cv)pick(e);drag=null;});
cv.addEventListener('mousemove',e=>{const r=cv.getBoundingClientRect();
if(drag&&Math.abs(e.clientX-drag.x)>3){drag.moved=true;const d=(e.clientX-drag.x)/(r.width-PAD.l-PAD.r)*(drag.b-drag.a);clampView(drag.a-d,drag.b-d);render();}
mouse=e.clientX-r.left;const h=hit(e);
if(!h){hideTip();if(hovBand>=0){hovBand=-1;render();}else overlay();return;}
const c=h.c,head=evt(h.ev)+'\nin use   '+sz(V.C.u[c])+'\nreserved '+sz(V.C.r[c])+'\nbuffers live '+V.C.l[c]+oomText(h.ev);
if(h.band>=0)showTip(e,blockText(h.band)+'\n\nat '+head);
else if(h.other)showTip(e,(V.C.l[c]-h.live)+' smaller buffers folded: '+sz(Math.max(0,V.C.u[c]-h.lb))+'\n\nat '+head);
else showTip(e,head);
if(h.band!==hovBand){hovBand=h.band;render();}else overlay();});
cv.addEventListener('mouseleave',()=>{mouse=null;hideTip();if(hovBand>=0){hovBand=-1;render();}else overlay();});
cv.addEventListener('dblclick',()=>{resetView();render();});
$('reset').onclick=()=>{resetView();render();};
$('topeak').onclick=()=>{selectEvent(V.d.peak.event);};
$('tooom').onclick=()=>{if(V.d.first_oom>=0)selectEvent(V.d.first_oom);};
addEventListener('resize',()=>render());
addEventListener('keydown',e=>{if(selEvent<0||(e.key!=='ArrowLeft'&&e.key!=='ArrowRight')||e.target.tagName==='SELECT')return;
const c=bucketOf(selEvent)+(e.key==='ArrowRight'?1:-1);if(c>=0&&c<V.nb){e.preventDefault();selectEvent(V.C.e[c]);}});
function pick(e){const h=hit(e);if(!h)return;selBand=h.band;selectEvent(h.ev);}

/* ---- segments and their blocks at an event ---- */
function segmentsAt(ev){const g=V.d.segs;let list=[];
for(let i=0;i<g.e.length&&g.e[i]<=ev;i++){const k=g.k[i],a=g.a[i],z=g.z[i];
if(k===0)list.push([a,z]);
else if(k===2){/* a mapping joins the ranges it touches (one expandable segment) */
let s=list.find(s=>s[0]+s[1]===a);if(s)s[1]+=z;else list.push(s=[a,z]);const nx=list.findIndex(q=>q[0]===s[0]+s[1]);if(nx>=0){s[1]+=list[nx][1];list.splice(nx,1);}}
else{const out=[];for(const s of list){const b0=s[0],b1=s[0]+s[1];if(b1<=a||b0>=a+z){out.push(s);continue;}
if(b0<a)out.push([b0,a-b0]);if(b1>a+z)out.push([a+z,b1-a-z]);}list=out;}}
return list.sort((p,q)=>p[0]-q[0]);}
function selectEvent(ev){if(ev<0||!V.nb)return;selEvent=ev;render();showSegments(ev);}
function showSegments(ev){
const segs=segmentsAt(ev),rows=segs.map(s=>({a:s[0],z:s[1],b:[],used:0})),out={a:-1,z:0,b:[],used:0};
let n=0,bytes=0;
for(let j=0;j<V.m;j++){if(!(V.S[j]<=ev&&ev<V.E[j]))continue;n++;bytes+=V.Z[j];const a=V.A[j];
let lo=0,hi2=rows.length-1,row=out;while(lo<=hi2){const mid=(lo+hi2)>>1;if(rows[mid].a<=a){if(a<rows[mid].a+rows[mid].z){row=rows[mid];break;}lo=mid+1;}else hi2=mid-1;}
row.b.push(j);row.used+=V.Z[j];}
const c=bucketOf(ev),exact=c>=0&&V.C.e[c]===ev,reserved=segs.reduce((s,x)=>s+x[1],0);
let title='Segments '+(ev<V.hs?'':'at ')+evt(ev)+': '+segs.length+' segment'+(segs.length===1?'':'s')+', '+sz(reserved)+' reserved; '+n+' blocks, '+sz(bytes)+' in use';
let note='';
if(V.B.total>V.m&&exact){const rest=V.C.u[c]-bytes,cnt=V.C.l[c]-n;if(cnt>0)note=cnt+' smaller buffers ('+sz(Math.max(0,rest))+') are not in the page: the '+V.m+' largest of '+V.B.total+' are';}
if(V.d.segs.total>V.d.segs.e.length)note+=(note?'; ':'')+'only the first '+V.d.segs.e.length+' of '+V.d.segs.total+' segment events are in the page';
$('segtitle').textContent=title+oomText(ev).replace('\n','; ');
const maxz=rows.reduce((m,r)=>Math.max(m,r.z),1);let html='',drawnB=0;const LIM=20000;
if(note)html+='<div class="hint">'+esc(note)+'</div>';
const show=rows.slice(0,2000);
function bar(r,width){let s='';r.b.sort((p,q)=>V.A[p]-V.A[q]);for(const j of r.b){if(drawnB>=LIM)break;drawnB++;
const l=r.z?(V.A[j]-r.a)/r.z*100:0,wd=r.z?V.Z[j]/r.z*100:0;
s+='<div class="blk'+(V.S[j]<V.hs?' before':'')+(j===selBand?' sel':'')+'" data-b="'+j+'" style="left:'+l.toFixed(4)+'%;width:'+wd.toFixed(4)+'%;background:'+(V.band[j]>=0?PAL[V.band[j]%PAL.length]:'#8a94a6')+'"></div>';}
return '<div class="segbar" style="width:'+width+'%">'+s+'</div>';}
for(const r of show){const w=Math.max(4,r.z/maxz*100);
html+='<div class="seg" data-a="'+r.a+'"><div class="seglab">'+hex(r.a)+' \u00b7 '+sz(r.z)+' \u00b7 '+r.b.length+' block'+(r.b.length===1?'':'s')+', '+sz(r.used)+' used ('+(r.z?(r.used/r.z*100).toFixed(1):'0')+'%), '+sz(Math.max(0,r.z-r.used))+' free</div>'+bar(r,w)+'</div>';}
if(rows.length>show.length)html+='<div class="hint">... and '+(rows.length-show.length)+' more segments</div>';
if(out.b.length){let lo=Infinity,hi3=0;for(const j of out.b){if(V.A[j]>=0){lo=Math.min(lo,V.A[j]);hi3=Math.max(hi3,V.A[j]+V.Z[j]);}}
const label=segs.length?out.b.length+' blocks outside the segments above':'no segment events in this trace: the '+out.b.length+' live blocks by address';
if(lo<hi3){out.a=lo;out.z=hi3-lo;}
html+='<div class="seg outside"><div class="seglab">'+esc(label)+'</div>'+(lo<hi3?bar(out,100):'')+'</div>';}
if(!rows.length&&!out.b.length)html+='<div class="hint">nothing reserved and nothing live at this event</div>';
$('segbox').innerHTML=html;document.body.dataset.segs=show.length;document.body.dataset.segblocks=drawnB;document.body.dataset.selected=ev;}
$('segbox').addEventListener('mousemove',e=>{const b=e.target.closest('.blk');if(!b){hideTip();return;}showTip(e,blockText(+b.dataset.b));});
$('segbox').addEventListener('mouseleave',hideTip);
$('segbox').addEventListener('click',e=>{const b=e.target.closest('.blk');if(!b)return;const j=+b.dataset.b;selBand=j;hi=[V.S[j],V.E[j]];render();
document.querySelectorAll('.blk.sel').forEach(x=>x.classList.remove('sel'));b.classList.add('sel');});

/* ---- the buffers live at the peak: blocks by size and a sortable table; rows:
 * [i,size,start,op,shape,source,label,category,end,share,lifetime] ---- */
const bl=$('blocks'),tb=document.querySelector('#buffers tbody'),PAGE=500,STRIP=400;let B=[];
$('more').onclick=()=>{shownRows+=PAGE;rows(sorted);};
function ev2(i){if(V.d.steps)return String(V.d.steps[Math.max(0,Math.min(i,V.d.steps.length-1))]);return i<V.hs?'before':String(i-V.hs);}
function detail(r){return sz(r[1])+'  ('+r[9].toFixed(1)+'% of live at peak)\nop:       '+r[3]+(r[6]&&r[6]!==r[3]?'\nlabel:    '+r[6]:'')+
'\nshape:    '+(r[4]||'-')+'\nsource:   '+(r[5]||'-')+'\ncategory: '+(r[7]||'-')+'\nlifetime: '+evl(r[2])+' .. '+(r[8]>=V.N1?'the end':evl(r[8]))+' ('+(V.d.steps?(r[8]>=V.N1?V.d.step_names.length:V.d.steps[r[8]])-V.d.steps[r[2]]+' steps':r[10]+' events')+')';}
function bandOf(r){for(let j=0;j<V.m;j++)if(V.S[j]===r[2]&&V.E[j]===r[8]&&V.Z[j]===r[1])return j;return -1;}
function select(i){document.querySelectorAll('.sel').forEach(e=>e.classList.remove('sel'));if(i===null){hi=null;render();return;}
const r=B[i];hi=[r[2],r[8]];selBand=bandOf(r);const d=bl.querySelector('[data-i="'+i+'"]');if(d)d.classList.add('sel');
const row=tb.querySelector('tr[data-i="'+i+'"]');if(row)row.classList.add('sel');render();}
bl.addEventListener('mousemove',e=>{const d=e.target.closest('div[data-i],div[data-o]');if(!d)return;
if(d.dataset.o){showTip(e,V.fold.count+' smaller buffers, '+sz(V.fold.bytes));return;}const r=B[+d.dataset.i];showTip(e,detail(r));
if(!hi||hi[0]!==r[2]||hi[1]!==r[8]){hi=[r[2],r[8]];overlay();}});
bl.addEventListener('mouseleave',()=>{hideTip();hi=null;overlay();});
bl.addEventListener('click',e=>{const d=e.target.closest('div[data-i]');if(d){select(+d.dataset.i);
const row=tb.querySelector('tr[data-i="'+d.dataset.i+'"]');if(row)row.scrollIntoView({block:'nearest'});}});
let shownRows=PAGE,sorted=[];
function rows(list){sorted=list;const more=$('more'),left=list.length-shownRows;more.style.display=left>0?'':'none';more.textContent='show '+Math.min(PAGE,left)+' more rows ('+left+' not shown)';
tb.innerHTML=list.slice(0,shownRows).map(r=>'<tr class="buf-row" data-i="'+r[0]+'"><td class="num">'+r[0]+'</td><td class="num">'+sz(r[1])+
'</td><td class="num">'+r[9].toFixed(1)+'%</td><td>'+esc(r[3])+'</td><td>'+esc(r[4]||'')+'</td><td>'+esc(r[5]||'')+
'</td><td>'+esc(r[7]||'')+'</td><td class="num">'+ev2(r[2])+'</td><td class="num">'+(r[8]>=V.N1?'end':ev2(r[8]))+'</td><td class="num">'+(V.d.steps?(r[8]>=V.N1?V.d.step_names.length:V.d.steps[r[8]])-V.d.steps[r[2]]:r[10])+'</td></tr>').join('');}
let sortK=1,sortDir=-1;
function sortBy(k,num){if(sortK===k)sortDir=-sortDir;else{sortK=k;sortDir=num?-1:1;}
const s=B.slice().sort((a,b)=>{const x=a[k],y=b[k];return (x<y?-1:x>y?1:a[0]-b[0])*sortDir;});rows(s);
document.querySelectorAll('th').forEach(t=>t.classList.toggle('sorted',+t.dataset.k===k));}
document.querySelectorAll('#buffers th').forEach(th=>th.addEventListener('click',()=>sortBy(+th.dataset.k,th.dataset.t==='n')));
tb.addEventListener('click',e=>{const tr=e.target.closest('tr');if(tr)select(+tr.dataset.i);});
tb.addEventListener('mousemove',e=>{const tr=e.target.closest('tr');if(tr)showTip(e,detail(B[+tr.dataset.i]));});
tb.addEventListener('mouseleave',hideTip);

/* ---- a device on the page ---- */
function setDevice(i){const d=D.devices[i];V=prep(d);dsel.value=String(i);hi=null;selBand=-1;hovBand=-1;
const live=d.events-d.history_start;
$('subtitle').textContent=D.source+' trace \u00b7 '+live+' events'+(d.device?' \u00b7 device '+d.device:'')+(D.devices.length>1?' \u00b7 device '+(i+1)+' of '+D.devices.length:'')+(d.steps?' \u00b7 an HLO module\u2019s plan: positions are schedule steps':d.has_time?'':' \u00b7 no times in the trace: events are numbered');
const cards=[['peak in use',sz(d.peak.bytes)],['at',d.events?evt(d.peak.event):'-'],
['peak reserved',sz(d.peak.reserved)],['live at peak',d.live_at_peak+' buffers'],['allocs / frees',d.allocs+' / '+d.frees],
['OOMs',d.ooms+(d.first_oom>=0?' (first at '+evl(d.first_oom)+')':'')]];
if(d.history_start)cards.push(['live before the history',sz(d.live_before_bytes)+' in '+d.live_before_blocks+' blocks, '+sz(d.reserved_before_bytes)+' reserved']);
if(d.truncated_at)cards.push(['truncated at byte',String(d.truncated_at)]);
$('cards').innerHTML=cards.map(c=>'<div class="card"><span>'+esc(c[0])+'</span><b>'+esc(c[1])+'</b></div>').join('');
$('legend').innerHTML='<span class="sw" style="background:#4e79a7"></span><span class="sw" style="background:#59a14f;margin-left:-4px"></span>'+(V.K.length<V.B.total?V.K.length+' buffers (the largest, and the largest by size \u00d7 lifetime)':'every buffer')+' each its own band, stacked in allocation order '+
(V.K.length<V.B.total?'<span class="sw" style="background:'+OTHER+';margin-left:12px"></span>the '+(V.B.total-V.K.length)+' others, folded ':'')+
(d.history_start?'<span class="sw hatch" style="margin-left:12px"></span>live before the history ('+sz(d.live_before_bytes)+' in '+d.live_before_blocks+' blocks) ':'')+
'<span class="sw" style="background:#f28e2c;margin-left:12px"></span>reserved'+(d.has_segments?'':' (no segment events: = in use)')+' &nbsp; wheel: zoom \u00b7 drag: pan \u00b7 double-click: reset \u00b7 hover: a band \u00b7 click: segments at that event \u00b7 \u2190 \u2192: the event before / after';
$('tooom').style.display=d.first_oom>=0?'':'none';
const total=d.buffers.reduce((s,b)=>s+b[0],0)+(d.others?d.others.bytes:0)||1;
B=d.buffers.map((b,k)=>[k,b[0],b[1],b[3]||b[6]||'(untagged)',b[4],b[5],b[6],b[7],b[2],b[0]/total*100,b[2]-b[1]]);
const rest=B.slice(STRIP);V.fold={count:rest.length+(d.others?d.others.count:0),bytes:rest.reduce((s,r)=>s+r[1],0)+(d.others?d.others.bytes:0)};
bl.innerHTML=B.slice(0,STRIP).map(r=>'<div data-i="'+r[0]+'" style="flex:0 0 '+r[9]+'%;background:'+color(r[3])+'"></div>').join('')+(V.fold.count?'<div style="flex:1 1 auto;background:#d5d9e0" data-o="1"></div>':'');
shownRows=PAGE;sortK=1;sortDir=1;sortBy(1,true);
$('blockstitle').textContent='Buffers live at the peak ('+(d.events?evt(d.peak.event):'no events')+'), by size: '+d.live_at_peak+' buffers, '+sz(d.live_at_peak_bytes);
resetView();selEvent=-1;if(!d.events)render();document.body.dataset.device=d.device;
if(d.events)selectEvent(d.peak.event);else $('segbox').innerHTML='<div class="hint">no events</div>';}
setDevice(0);
document.body.dataset.ready='1';document.body.dataset.loadms=Math.round(performance.now());document.body.dataset.parsems=Math.round(T1-T0);document.body.dataset.scriptms=Math.round(performance.now()-T0);
/* #selftest (tests/test_view_html.sh): drive the page through real DOM events and report
 * what it did in data-selftest */
if(location.hash==='#selftest'){const res=[];const ths=document.querySelectorAll('#buffers th');
ths[3].click();const ops=[...tb.querySelectorAll('tr')].map(r=>r.children[3].textContent);
res.push('sort-op:'+(ops.every((o,i)=>!i||ops[i-1]<=o)?'ok':'bad'));
ths[1].click();const s2=[...tb.querySelectorAll('tr')].map(r=>B[+r.dataset.i][1]);
res.push('sort-size:'+(s2.every((v,i)=>!i||s2[i-1]>=v)?'ok':'bad'));
const r=cv.getBoundingClientRect();cv.dispatchEvent(new WheelEvent('wheel',{deltaY:-100,clientX:r.left+r.width/2,clientY:r.top+50,bubbles:true,cancelable:true}));
res.push('zoom:'+(x1-x0<V.N1-V.N0?'ok':'bad'));{const a=performance.now();render();document.body.dataset.renderms=Math.round(performance.now()-a);}cv.dispatchEvent(new MouseEvent('dblclick',{bubbles:true}));res.push('reset:'+(x0===V.N0&&x1===Math.max(V.N1,V.N0+1)?'ok':'bad'));
const b0=bl.querySelector('div[data-i]');if(b0){b0.dispatchEvent(new MouseEvent('mousemove',{bubbles:true,clientX:5,clientY:5}));
res.push('hover:'+(tip.style.display==='block'&&tip.textContent.includes('lifetime')&&hi?'ok':'bad'));}
res.push('bands:'+(G.drawn>0?'ok':'bad'));
if($('more').style.display!=='none'){const n0=tb.children.length;$('more').click();res.push('more:'+(tb.children.length===Math.min(B.length,n0+PAGE)?'ok':'bad'));}
/* hover the middle of the peak column: a band (or the folded rest) with its size */
let px=-1;for(let x=0;x<G.pw;x++)if(G.rep[x]===V.d.peak.event){px=x;break;}
if(px>=0){const cxp=r.left+(G.pl+px+0.5)/G.dpr,cyp=r.top+(G.pt+G.ph-1)/G.dpr-1;
cv.dispatchEvent(new MouseEvent('mousemove',{bubbles:true,clientX:cxp,clientY:cyp}));
res.push('band-hover:'+(tip.style.display==='block'&&/lifetime|folded/.test(tip.textContent)?'ok':'bad'));
cv.dispatchEvent(new MouseEvent('mousedown',{bubbles:true,clientX:cxp,clientY:cyp}));cv.dispatchEvent(new MouseEvent('mouseup',{bubbles:true,clientX:cxp,clientY:cyp}));
res.push('pick:'+(selEvent===V.d.peak.event&&$('segtitle').textContent.startsWith('Segments '+(V.d.peak.event<V.hs?'':'at ')+evl(V.d.peak.event))?'ok':'bad'));}
{const before=selEvent;dispatchEvent(new KeyboardEvent('keydown',{key:'ArrowLeft'}));res.push('arrow:'+(selEvent<before||before===V.N0?'ok':'bad'));}
if(V.d.first_oom>=0){$('tooom').click();res.push('oom:'+(selEvent===V.d.first_oom&&$('segtitle').textContent.includes('OOM: tried to allocate')?'ok':'bad'));}
if(!V.d.has_time)res.push('no-seconds:'+(/\d\.\d+s\b/.test(document.body.innerText+document.body.dataset.axis)?'bad':'ok'));
if(D.devices.length>1){dsel.value='1';dsel.dispatchEvent(new Event('change'));
res.push('device:'+(document.body.dataset.device===D.devices[1].device&&$('subtitle').textContent.includes('device 2 of')?'ok':'bad'));
dsel.value='0';dsel.dispatchEvent(new Event('change'));}
document.body.dataset.selftest=res.join(' ');}
})();
