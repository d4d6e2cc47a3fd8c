#!/usr/bin/env python3
# attention_mirror.py - the CUDA attention kernels' loops, checked in numpy.
#
# Part of the dsc project. Mirrors lib/Runtime/Cuda/Attention.cu (64-row
# blocks, 32-row tiles, online softmax, the dq kernel's two passes, the dk/dv
# kernel's causal query start, dropout indices of a sliced rank) in float64
# and compares with a dense reference. A manual check of the algorithm for
# machines without a GPU (needs numpy); not part of ctest.
import numpy as np
M64=(1<<64)-1
def mix64(z):
    z=(z+0x9E3779B97F4A7C15)&M64
    z=((z^(z>>30))*0xBF58476D1CE4E5B9)&M64
    z=((z^(z>>27))*0x94D049BB133111EB)&M64
    return z^(z>>31)
def thr(p):
    t=p*(1<<24); return 0 if t<=0 else ((1<<24) if t>=(1<<24) else int(t+0.5))
def keep(key,idx,th): return (mix64((key+idx)&M64)>>40)>=th
kRows,kTile=64,32
def run(B,S,Hd,NH,causal,p,seed,boff=0,hoff=0,tot=0):
    HD=Hd//NH; tot=tot or NH
    rng=np.random.default_rng(0)
    q,k,v,dO=[rng.standard_normal((B,S,Hd)) for _ in range(4)]
    scale=1/np.sqrt(HD); key=mix64(seed); th=thr(p); inv=1/(1-p) if p<1 else 0
    def K(b,h,i,j):
        if p<=0: return 1.0
        mr=((boff+b)*tot+hoff+h)*S*S
        return inv if keep(key,mr+i*S+j,th) else 0.0
    out=np.zeros_like(q); lse=np.zeros((B,NH,S)); dq=np.zeros_like(q); dk=np.zeros_like(q); dv=np.zeros_like(q)
    ref=dict(out=np.zeros_like(q),dq=np.zeros_like(q),dk=np.zeros_like(q),dv=np.zeros_like(q))
    for b in range(B):
      for h in range(NH):
        c=slice(h*HD,(h+1)*HD)
        Q,Kk,V,DO=q[b,:,c],k[b,:,c],v[b,:,c],dO[b,:,c]
        Dm=np.array([[K(b,h,i,j) for j in range(S)] for i in range(S)])
        # dense reference
        Sc=Q@Kk.T*scale
        if causal: Sc=np.where(np.tril(np.ones((S,S)))>0,Sc,-np.inf)
        P=np.exp(Sc-Sc.max(1,keepdims=True)); P/=P.sum(1,keepdims=True)
        Pd=P*Dm; ref['out'][b,:,c]=Pd@V
        dPd=DO@V.T; dP=dPd*Dm; dS=P*(dP-(P*dP).sum(1,keepdims=True))
        ref['dq'][b,:,c]=dS@Kk*scale; ref['dk'][b,:,c]=dS.T@Q*scale; ref['dv'][b,:,c]=Pd.T@DO
        # kernel mirror: forward
        for bx in range((S+kRows-1)//kRows):
          for i in range(bx*kRows,min(S,bx*kRows+kRows)):
            m=-np.inf;l=0.0;acc=np.zeros(HD)
            keyEnd=min(S,(bx+1)*kRows) if causal else S
            for j0 in range(0,keyEnd,kTile):
              sc=[]
              for jj in range(kTile):
                j=j0+jj
                s=(Q[i]*scale)@Kk[j] if j<S else 0.0
                if j>=S or (causal and j>i): s=-np.inf
                sc.append(s)
              nm=max(m,max(sc)); corr=np.exp(m-nm); l*=corr; acc*=corr; m=nm
              for jj in range(kTile):
                pr=np.exp(sc[jj]-m); l+=pr
                if p>0 and j0+jj<S: pr*=K(b,h,i,j0+jj)
                if j0+jj<S: acc+=pr*V[j0+jj]
            out[b,i,c]=acc/l; lse[b,h,i]=m+np.log(l)
        # dq kernel
        Drow=np.zeros(S)
        for bx in range((S+kRows-1)//kRows):
          for i in range(bx*kRows,min(S,bx*kRows+kRows)):
            keyEnd=min(S,(bx+1)*kRows) if causal else S
            D=0.0;g=np.zeros(HD)
            for pas in range(2):
              for j0 in range(0,keyEnd,kTile):
                for jj in range(kTile):
                  j=j0+jj
                  if j>=S: s=0;dp=0
                  else: s=(Q[i]*scale)@Kk[j]; dp=DO[i]@V[j]
                  masked=j>=S or (causal and j>i)
                  pr=0.0 if masked else np.exp(s-lse[b,h,i])
                  if p>0 and j<S: dp*=K(b,h,i,j)
                  if pas==0: D+=pr*dp
                  else:
                    if j<S: g+=pr*(dp-D)*Kk[j]
            Drow[i]=D; dq[b,i,c]=g*scale
            # dRowFromOutKernel's shortcut: D_i = dO_i . O_i, dropout included.
            assert abs(D-DO[i]@out[b,i,c])<1e-9*(1+abs(D))
        # dkv kernel
        for bx in range((S+kRows-1)//kRows):
          qStart=(bx*kRows//kTile)*kTile if causal else 0
          for j in range(bx*kRows,min(S,bx*kRows+kRows)):
            gk=np.zeros(HD);gv=np.zeros(HD)
            for i0 in range(qStart,S,kTile):
              for ii in range(kTile):
                i=i0+ii
                if i>=S: continue
                s=(Kk[j]*scale)@Q[i]; dp=V[j]@DO[i]
                masked=causal and j>i
                pr=0.0 if masked else np.exp(s-lse[b,h,i])
                kp=K(b,h,i,j) if p>0 else 1.0
                gv+=pr*kp*DO[i]; gk+=pr*(dp*kp-Drow[i])*Q[i]
            dk[b,j,c]=gk*scale; dv[b,j,c]=gv
    for name,got in [('out',out),('dq',dq),('dk',dk),('dv',dv)]:
        e=np.linalg.norm(got-ref[name])/np.linalg.norm(ref[name])
        print(f"S={S} HD={HD} causal={causal} p={p} {name}: rel {e:.2e}")
        assert e<1e-10
run(1,77,32,2,True,0.0,1)
run(1,77,32,2,False,0.0,1)
run(2,70,16,1,True,0.2,1234,boff=3,hoff=2,tot=8)
print("ok")
