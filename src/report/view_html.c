/* view_html.c - hbm view --html: one self-contained page (inline CSS, script and data; no
 * network). A canvas timeline of in-use and reserved bytes (wheel to zoom, drag to pan,
 * double-click to reset, hover for values), the buffers live at the peak as stacked blocks
 * by size (hover for size, shape, op, source line, lifetime; the lifetime is drawn on the
 * timeline), and a table of those buffers sortable by any column. */
#include <inttypes.h>
#include <string.h>

#include "hbm/size.h"
#include "report/view_internal.h"

#define MAX_POINTS 2000
#define MAX_BUFFERS 5000

/* A JSON string that is also safe inside <script>: '<', '>' and '&' as \u escapes. */
static void hstr(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&') fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* HTML text (title) */
static void htext(FILE *f, const char *s) {
    for (const char *p = s ? s : ""; *p; p++) {
        if (*p == '<') fputs("&lt;", f);
        else if (*p == '>') fputs("&gt;", f);
        else if (*p == '&') fputs("&amp;", f);
        else if (*p == '"') fputs("&quot;", f);
        else fputc(*p, f);
    }
}

static const char page_head[] =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<style>\n"
    "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;background:#fafafa;color:#1d2330}\n"
    "header{background:#1d2330;color:#fff;padding:14px 22px}header h1{font-size:18px;margin:0 0 4px}\n"
    "header .sub{color:#b8c0d0;font-size:13px}\n"
    "main{padding:14px 22px;max-width:1400px}\n"
    ".cards{display:flex;gap:12px;flex-wrap:wrap;margin-bottom:14px}\n"
    ".card{background:#fff;border:1px solid #dde2ea;border-radius:6px;padding:8px 14px;min-width:140px}\n"
    ".card b{display:block;font-size:18px}.card span{color:#5b6475;font-size:12px}\n"
    "h2{font-size:15px;margin:18px 0 6px}\n"
    "#chartbox{position:relative;background:#fff;border:1px solid #dde2ea;border-radius:6px}\n"
    "#timeline{display:block;width:100%;height:280px;cursor:crosshair}\n"
    ".hint{color:#5b6475;font-size:12px;margin:4px 0}\n"
    "#blocks{display:flex;height:64px;border:1px solid #dde2ea;border-radius:6px;overflow:hidden;background:#fff}\n"
    "#blocks div{height:100%;border-right:1px solid rgba(255,255,255,.7);box-sizing:border-box;min-width:1px}\n"
    "#blocks div:hover,#blocks div.sel{outline:2px solid #1d2330;outline-offset:-2px}\n"
    "#tip{position:fixed;pointer-events:none;background:#1d2330;color:#fff;padding:6px 9px;border-radius:5px;"
    "font-size:12px;white-space:pre;display:none;z-index:9}\n"
    "table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}\n"
    "th,td{border-bottom:1px solid #e6e9ef;padding:4px 8px;text-align:left;white-space:nowrap}\n"
    "th{cursor:pointer;background:#eef1f6;position:sticky;top:0;user-select:none}th.sorted{background:#dfe5ef}\n"
    "td.num{text-align:right;font-variant-numeric:tabular-nums}tr.sel td{background:#fff3c4}\n"
    "#tablebox{max-height:520px;overflow:auto;border:1px solid #dde2ea;border-radius:6px}\n"
    ".sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;vertical-align:middle}\n"
    "button{font:inherit;font-size:12px;padding:2px 10px;margin-left:8px}\n"
    "</style>\n";

static const char page_body[] =
    "</head><body>\n"
    "<header><h1 id=\"title\"></h1><div class=\"sub\" id=\"subtitle\"></div></header>\n<main>\n"
    "<div class=\"cards\" id=\"cards\"></div>\n"
    "<h2>Memory over time <button id=\"reset\">reset zoom</button></h2>\n"
    "<div id=\"chartbox\"><canvas id=\"timeline\"></canvas></div>\n"
    "<div class=\"hint\"><span class=\"sw\" style=\"background:#4e79a7\"></span>in use "
    "<span class=\"sw\" style=\"background:#f28e2c;margin-left:12px\"></span>reserved &nbsp; "
    "wheel: zoom &middot; drag: pan &middot; double-click: reset &middot; hover a block below to see its lifetime</div>\n"
    "<h2 id=\"blockstitle\">Buffers live at the peak, by size</h2>\n<div id=\"blocks\"></div>\n"
    "<h2>Buffers live at the peak <span class=\"hint\">(click a column to sort)</span></h2>\n"
    "<div id=\"tablebox\"><table id=\"buffers\"><thead><tr>"
    "<th data-k=\"0\" data-t=\"n\">#</th><th data-k=\"1\" data-t=\"n\">size</th><th data-k=\"9\" data-t=\"n\">share</th>"
    "<th data-k=\"3\">op</th><th data-k=\"4\">shape</th><th data-k=\"5\">source</th><th data-k=\"7\">category</th>"
    "<th data-k=\"2\" data-t=\"n\">start</th><th data-k=\"8\" data-t=\"n\">end</th><th data-k=\"10\" data-t=\"n\">lifetime</th>"
    "</tr></thead><tbody></tbody></table></div>\n</main>\n<div id=\"tip\"></div>\n";

static const char page_script[] =
    "<script>\n(function(){\n'use strict';\n"
    "const D=JSON.parse(document.getElementById('hbm-data').textContent);\n"
    "const U=['B','KiB','MiB','GiB','TiB'];\n"
    "function sz(b){let i=0,v=b;while(v>=1024&&i<U.length-1){v/=1024;i++;}return (i?v.toFixed(2):v)+U[i];}\n"
    "function esc(s){return String(s).replace(/[&<>\"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','\"':'&quot;'}[c]));}\n"
    "const PAL=['#4e79a7','#59a14f','#e15759','#76b7b2','#edc949','#af7aa1','#ff9da7','#9c755f','#f28e2c','#bab0ab'];\n"
    /* colours by op, in order of first appearance among the largest buffers */
    "const COL={};function color(s){if(!(s in COL))COL[s]=PAL[Object.keys(COL).length%PAL.length];return COL[s];}\n"
    "document.getElementById('title').textContent=D.title;\n"
    "document.getElementById('subtitle').textContent=D.source+' trace \\u00b7 '+D.events+' events'+(D.device?' \\u00b7 '+D.device:'');\n"
    "document.title='hbm view: '+D.title;\n"
    "const cards=[['peak in use',sz(D.peak.bytes)],['at event',D.peak.event+' ('+D.peak.time.toFixed(6)+'s)'],"
    "['peak reserved',sz(D.peak.reserved)],['live at peak',D.live_at_peak+' buffers'],['allocs / frees',D.allocs+' / '+D.frees],"
    "['OOMs',D.ooms+(D.first_oom>=0?' (first at event '+D.first_oom+')':'')]];\n"
    "document.getElementById('cards').innerHTML=cards.map(c=>'<div class=\"card\"><span>'+esc(c[0])+'</span><b>'+esc(c[1])+'</b></div>').join('');\n"
    "const tip=document.getElementById('tip');\n"
    "function showTip(e,text){tip.textContent=text;tip.style.display='block';"
    "tip.style.left=Math.min(e.clientX+14,innerWidth-tip.offsetWidth-8)+'px';tip.style.top=(e.clientY+14)+'px';}\n"
    "function hideTip(){tip.style.display='none';}\n"
    /* --- timeline --- */
    "const cv=document.getElementById('timeline'),cx=cv.getContext('2d');\n"
    "const C=D.curve,N=Math.max(1,D.events);let x0=0,x1=N,hi=null,mouse=null;\n"
    "const ymax=Math.max(1,...C.map(p=>Math.max(p[1],p[2])));\n"
    "const PAD={l:70,r:14,t:12,b:26};\n"
    "function X(v,w){return PAD.l+(v-x0)/(x1-x0)*(w-PAD.l-PAD.r);}\n"
    "function Y(v,h){return h-PAD.b-v/ymax*(h-PAD.t-PAD.b);}\n"
    "function draw(){const r=cv.getBoundingClientRect(),dpr=devicePixelRatio||1;cv.width=r.width*dpr;cv.height=r.height*dpr;"
    "cx.setTransform(dpr,0,0,dpr,0,0);const w=r.width,h=r.height;cx.clearRect(0,0,w,h);"
    "cx.font='11px sans-serif';cx.fillStyle='#5b6475';cx.strokeStyle='#e6e9ef';cx.lineWidth=1;"
    "for(let i=0;i<=4;i++){const v=ymax*i/4,y=Y(v,h);cx.beginPath();cx.moveTo(PAD.l,y);cx.lineTo(w-PAD.r,y);cx.stroke();"
    "cx.fillText(sz(Math.round(v)),4,y+4);}\n"
    "for(let i=0;i<=6;i++){const v=x0+(x1-x0)*i/6;cx.textAlign=i?(i<6?'center':'right'):'left';"
    "cx.fillText('event '+Math.round(v),X(v,w),h-8);}cx.textAlign='left';\n"
    "cx.save();cx.beginPath();cx.rect(PAD.l,0,w-PAD.l-PAD.r,h);cx.clip();\n"
    "if(hi){cx.fillStyle='rgba(237,201,73,.35)';cx.fillRect(X(hi[0],w),PAD.t,Math.max(2,X(hi[1],w)-X(hi[0],w)),h-PAD.t-PAD.b);}\n"
    /* step curves: a value holds from its event to the next one */
    "function steps(k,cont){C.forEach((p,i)=>{const x=X(p[0],w),y=Y(p[k],h);if(!i){if(cont)cx.lineTo(x,y);else cx.moveTo(x,y);}"
    "else{cx.lineTo(x,Y(C[i-1][k],h));cx.lineTo(x,y);}});"
    "if(C.length)cx.lineTo(X(N,w),Y(C[C.length-1][k],h));}\n"
    "cx.beginPath();cx.moveTo(X(C.length?C[0][0]:0,w),Y(0,h));steps(1,true);cx.lineTo(X(N,w),Y(0,h));cx.closePath();"
    "cx.fillStyle='rgba(78,121,167,.55)';cx.fill();\n"
    "cx.beginPath();steps(2,false);cx.strokeStyle='#f28e2c';cx.lineWidth=2;cx.stroke();\n"
    "const px=X(D.peak.event,w);cx.strokeStyle='#e15759';cx.setLineDash([4,3]);cx.beginPath();cx.moveTo(px,PAD.t);"
    "cx.lineTo(px,h-PAD.b);cx.stroke();cx.setLineDash([]);cx.fillStyle='#e15759';cx.fillText('peak',px+3,PAD.t+10);\n"
    "if(mouse!==null){cx.strokeStyle='#1d2330';cx.beginPath();cx.moveTo(mouse,PAD.t);cx.lineTo(mouse,h-PAD.b);cx.stroke();}\n"
    "cx.restore();}\n"
    "function at(ev){let lo=0,hi2=C.length-1;while(lo<hi2){const m=(lo+hi2+1)>>1;if(C[m][0]<=ev)lo=m;else hi2=m-1;}return C[lo];}\n"
    "function evAt(clientX){const r=cv.getBoundingClientRect();return x0+(clientX-r.left-PAD.l)/(r.width-PAD.l-PAD.r)*(x1-x0);}\n"
    "let drag=null;\n"
    "cv.addEventListener('wheel',e=>{e.preventDefault();const c=evAt(e.clientX),k=e.deltaY<0?0.8:1.25;"
    "let a=c-(c-x0)*k,b=c+(x1-c)*k;if(b-a<4){return;}x0=Math.max(0,a);x1=Math.min(N,b);draw();},{passive:false});\n"
    "cv.addEventListener('mousedown',e=>{drag={x:e.clientX,a:x0,b:x1};});\n"
    "addEventListener('mouseup',()=>{drag=null;});\n"
    "cv.addEventListener('mousemove',e=>{const r=cv.getBoundingClientRect();if(drag){const d=(e.clientX-drag.x)/(r.width-PAD.l-PAD.r)*(drag.b-drag.a);"
    "let a=drag.a-d,b=drag.b-d;if(a<0){b-=a;a=0;}if(b>N){a-=b-N;b=N;}x0=Math.max(0,a);x1=b;}"
    "mouse=e.clientX-r.left;const ev=Math.max(0,Math.round(evAt(e.clientX)));if(C.length){const p=at(ev);"
    "showTip(e,'event '+p[0]+(p[3]!==undefined?'  t='+p[3].toFixed(6)+'s':'')+'\\nin use   '+sz(p[1])+'\\nreserved '+sz(p[2]));}draw();});\n"
    "cv.addEventListener('mouseleave',()=>{mouse=null;hideTip();draw();});\n"
    "cv.addEventListener('dblclick',()=>{x0=0;x1=N;draw();});\n"
    "document.getElementById('reset').onclick=()=>{x0=0;x1=N;draw();};\n"
    "addEventListener('resize',draw);\n"
    /* --- blocks + table; B rows: [i,size,start,op,shape,source,label,category,end,share,lifetime] --- */
    "const total=D.buffers.reduce((s,b)=>s+b[0],0)+(D.others?D.others.bytes:0)||1;\n"
    "const B=D.buffers.map((b,i)=>[i,b[0],b[1],b[3]||b[6]||'(untagged)',b[4],b[5],b[6],b[7],b[2],b[0]/total*100,b[2]-b[1]]);\n"
    "function detail(r){return sz(r[1])+'  ('+r[9].toFixed(1)+'% of live at peak)\\nop:       '+r[3]+(r[6]&&r[6]!==r[3]?'\\nlabel:    '+r[6]:'')+"
    "'\\nshape:    '+(r[4]||'-')+'\\nsource:   '+(r[5]||'-')+'\\ncategory: '+(r[7]||'-')+'\\nlifetime: events ['+r[2]+', '+r[8]+')';}\n"
    "const bl=document.getElementById('blocks');\n"
    "bl.innerHTML=B.map(r=>'<div data-i=\"'+r[0]+'\" style=\"flex:0 0 '+r[9]+'%;background:'+color(r[3])+'\"></div>').join('')+"
    "(D.others?'<div style=\"flex:1 1 auto;background:#d5d9e0\" data-o=\"1\"></div>':'');\n"
    "const tb=document.querySelector('#buffers tbody');\n"
    "function select(i){document.querySelectorAll('.sel').forEach(e=>e.classList.remove('sel'));if(i===null){hi=null;draw();return;}"
    "const r=B[i];hi=[r[2],r[8]];const d=bl.querySelector('[data-i=\"'+i+'\"]');if(d)d.classList.add('sel');"
    "const row=tb.querySelector('tr[data-i=\"'+i+'\"]');if(row)row.classList.add('sel');draw();}\n"
    "bl.addEventListener('mousemove',e=>{const d=e.target.closest('div[data-i],div[data-o]');if(!d)return;"
    "if(d.dataset.o){showTip(e,D.others.count+' smaller buffers, '+sz(D.others.bytes));return;}const r=B[+d.dataset.i];showTip(e,detail(r));"
    "if(!hi||hi[0]!==r[2]||hi[1]!==r[8]){hi=[r[2],r[8]];draw();}});\n"
    "bl.addEventListener('mouseleave',()=>{hideTip();hi=null;draw();});\n"
    "bl.addEventListener('click',e=>{const d=e.target.closest('div[data-i]');if(d){select(+d.dataset.i);"
    "const row=tb.querySelector('tr[data-i=\"'+d.dataset.i+'\"]');if(row)row.scrollIntoView({block:'nearest'});}});\n"
    "function rows(list){tb.innerHTML=list.map(r=>'<tr class=\"buf-row\" data-i=\"'+r[0]+'\"><td class=\"num\">'+r[0]+'</td><td class=\"num\">'+sz(r[1])+"
    "'</td><td class=\"num\">'+r[9].toFixed(1)+'%</td><td>'+esc(r[3])+'</td><td>'+esc(r[4]||'')+'</td><td>'+esc(r[5]||'')+"
    "'</td><td>'+esc(r[7]||'')+'</td><td class=\"num\">'+r[2]+'</td><td class=\"num\">'+r[8]+'</td><td class=\"num\">'+r[10]+'</td></tr>').join('');}\n"
    "let sortK=1,sortDir=-1;\n"
    "function sortBy(k,num){if(sortK===k)sortDir=-sortDir;else{sortK=k;sortDir=num?-1:1;}"
    "const s=B.slice().sort((a,b)=>{const x=a[k],y=b[k];return (x<y?-1:x>y?1:a[0]-b[0])*sortDir;});rows(s);"
    "document.querySelectorAll('th').forEach(t=>t.classList.toggle('sorted',+t.dataset.k===k));}\n"
    "document.querySelectorAll('#buffers th').forEach(th=>th.addEventListener('click',()=>sortBy(+th.dataset.k,th.dataset.t==='n')));\n"
    "tb.addEventListener('click',e=>{const tr=e.target.closest('tr');if(tr)select(+tr.dataset.i);});\n"
    "tb.addEventListener('mousemove',e=>{const tr=e.target.closest('tr');if(tr)showTip(e,detail(B[+tr.dataset.i]));});\n"
    "tb.addEventListener('mouseleave',hideTip);\n"
    "sortDir=1;sortBy(1,true);\n"
    "document.getElementById('blockstitle').textContent='Buffers live at the peak (event '+D.peak.event+'), by size: '+D.live_at_peak+' buffers, '+sz(D.live_at_peak_bytes);\n"
    "draw();document.body.dataset.ready='1';\n"
    /* #selftest (used by tests/test_view_html.sh): drive sorting, zoom and hover through
     * real DOM events and report what the page did in data-selftest */
    "if(location.hash==='#selftest'){const res=[];const ths=document.querySelectorAll('#buffers th');"
    "ths[3].click();const ops=[...tb.querySelectorAll('tr')].map(r=>r.children[3].textContent);"
    "res.push('sort-op:'+(ops.every((o,i)=>!i||ops[i-1]<=o)?'ok':'bad'));"
    "ths[1].click();const s2=[...tb.querySelectorAll('tr')].map(r=>B[+r.dataset.i][1]);"
    "res.push('sort-size:'+(s2.every((v,i)=>!i||s2[i-1]>=v)?'ok':'bad'));"
    "const r=cv.getBoundingClientRect();cv.dispatchEvent(new WheelEvent('wheel',{deltaY:-100,clientX:r.left+r.width/2,clientY:r.top+50,bubbles:true,cancelable:true}));"
    "res.push('zoom:'+(x1-x0<N?'ok':'bad'));cv.dispatchEvent(new MouseEvent('dblclick',{bubbles:true}));res.push('reset:'+(x0===0&&x1===N?'ok':'bad'));"
    "const b0=bl.querySelector('div[data-i]');if(b0){b0.dispatchEvent(new MouseEvent('mousemove',{bubbles:true,clientX:5,clientY:5}));"
    "res.push('hover:'+(tip.style.display==='block'&&tip.textContent.includes('lifetime')&&hi?'ok':'bad'));}"
    "document.body.dataset.selftest=res.join(' ');}\n"
    "})();\n</script>\n</body></html>\n";

hbm_status hbm_view_html(const hbm_trace *t, const hbm_view_options *o, FILE *f) {
    if (!t || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_view_html: NULL argument");
    hbmi_view v;
    hbm_status s = hbmi_view_build(t, &v);
    if (s) return s;
    const char *title = o && o->title ? o->title : t->name;
    fputs(page_head, f);
    fputs("<title>hbm view: ", f);
    htext(f, title);
    fputs("</title>\n<script type=\"application/json\" id=\"hbm-data\">{\"title\": ", f);
    hstr(f, title);
    fputs(", \"source\": ", f);
    hstr(f, t->source[0] ? t->source : "hbm");
    fputs(", \"device\": ", f);
    hstr(f, t->device);
    fprintf(f,
            ", \"events\": %zu, \"peak\": {\"bytes\": %" PRIu64 ", \"event\": %zu, \"time\": %.9f, \"reserved\": %" PRIu64
            "}, \"allocs\": %" PRIu64 ", \"frees\": %" PRIu64 ", \"ooms\": %" PRIu64 ", \"first_oom\": %" PRId64
            ", \"live_at_peak\": %zu, \"live_at_peak_bytes\": %" PRIu64 ",\n\"curve\": [",
            t->count, v.peak_use, v.peak_i, t->count ? (double)t->events[v.peak_i].time_ns / 1e9 : 0.0, v.peak_res,
            v.allocs, v.frees, v.ooms, v.first_oom, v.n_at_peak, v.at_peak_bytes);
    /* down-sample to MAX_POINTS: each bucket contributes its highest point (in use) and
     * the peak event is always kept */
    size_t n = t->count, buckets = n < MAX_POINTS ? n : MAX_POINTS;
    for (size_t c = 0; c < buckets; c++) {
        size_t a = c * n / buckets, b = (c + 1) * n / buckets, best = a;
        for (size_t i = a; i < b; i++)
            if (v.use[i] > v.use[best] || i == v.peak_i) {
                best = i;
                if (i == v.peak_i) break;
            }
        fprintf(f, "%s[%zu,%" PRIu64 ",%" PRIu64 ",%.9f]", c ? "," : "", best, v.use[best], v.res[best],
                (double)t->events[best].time_ns / 1e9);
    }
    fputs("],\n\"buffers\": [", f);
    size_t shown = v.n_at_peak < MAX_BUFFERS ? v.n_at_peak : MAX_BUFFERS;
    uint64_t other_bytes = 0;
    for (size_t k = 0; k < v.n_at_peak; k++) {
        const hbm_tl_buffer *bf = &v.tl->buffers[v.at_peak[k]];
        if (k >= shown) {
            other_bytes += bf->size;
            continue;
        }
        const hbm_tag *tg = hbm_timeline_tag_at(v.tl, bf->tag);
        char src[300];
        fprintf(f, "%s\n[%" PRIu64 ",%" PRId64 ",%" PRId64 ",", k ? "," : "", bf->size, bf->start, bf->end);
        hstr(f, tg && tg->op_name ? tg->op_name : "");
        fputc(',', f);
        hstr(f, tg && tg->shape ? tg->shape : "");
        fputc(',', f);
        hstr(f, hbmi_view_source(tg, src, sizeof src));
        fputc(',', f);
        hstr(f, tg && tg->label ? tg->label : "");
        fputc(',', f);
        hstr(f, tg ? hbm_category_str(tg->category) : "");
        fputc(']', f);
    }
    fputs("]", f);
    if (shown < v.n_at_peak) fprintf(f, ", \"others\": {\"count\": %zu, \"bytes\": %" PRIu64 "}", v.n_at_peak - shown, other_bytes);
    fputs("}</script>\n", f);
    fputs(page_body, f);
    fputs(page_script, f);
    hbmi_view_free(&v);
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "writing the HTML view failed") : HBM_OK;
}
