package onnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The members keep their data in PersistentVolumes, as deploy/ ships them
// (the StatefulSet's volumeClaimTemplates): a deleted or recreated pod comes
// back with its data, diverged or not, as in production. The node has no
// provisioner, so the harness makes one hostPath volume per member, bound in
// advance to the claim its pod will make (claimRef), and empties it when a
// test needs a member to lose its data (wipeMember).

// serverUID owns the data directory: the server and the agent run as it.
const serverUID = 999

// claimName is the PersistentVolumeClaim the StatefulSet makes for member.
func claimName(member string) string { return "data-" + member }

// volumeName is the PersistentVolume made for member's claim.
func volumeName(member string) string { return namespace + "-" + claimName(member) }

// volumeDir is where member's volume lives on the node.
func volumeDir(member string) string { return filepath.Join(nodeDir, "volumes", member) }

// createVolume makes member's volume, empty, offered to its claim only.
func (c *cluster) createVolume(ctx context.Context, member string) error {
	dir := volumeDir(member)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if err := os.Chown(dir, serverUID, serverUID); err != nil {
		return err
	}
	hostPathType := corev1.HostPathDirectory
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: volumeName(member)},
		Spec: corev1.PersistentVolumeSpec{
			// At least what the volumeClaimTemplate asks; nothing enforces it.
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: namespace, Name: claimName(member)},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &hostPathType},
			},
		},
	}
	if _, err := c.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the volume of %s: %w", member, err)
	}
	return nil
}

// createVolumes makes every member's volume, empty.
func (c *cluster) createVolumes(ctx context.Context) error {
	for _, m := range members {
		if err := c.createVolume(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// deleteVolume deletes member's volume and waits until it is gone; its
// claim must be gone already (a Released volume cannot bind a new claim).
func (c *cluster) deleteVolume(ctx context.Context, member string) error {
	pvs := c.client.CoreV1().PersistentVolumes()
	if err := pvs.Delete(ctx, volumeName(member), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the volume of %s: %w", member, err)
	}
	return poll(time.Minute, "the volume of "+member+" to go", func() bool {
		_, err := pvs.Get(ctx, volumeName(member), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// deleteClaim deletes member's claim; it goes once no pod uses it.
func (c *cluster) deleteClaim(ctx context.Context, member string) (*corev1.PersistentVolumeClaim, error) {
	claims := c.client.CoreV1().PersistentVolumeClaims(namespace)
	old, err := claims.Get(ctx, claimName(member), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := claims.Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("deleting the claim of %s: %w", member, err)
	}
	return old, nil
}

// awaitClaimGone waits until the claim old is gone (a claim of the same
// name the StatefulSet makes afterwards is another).
func (c *cluster) awaitClaimGone(ctx context.Context, old *corev1.PersistentVolumeClaim, timeout time.Duration) error {
	if old == nil {
		return nil
	}
	return poll(timeout, "the claim "+old.Name+" to go", func() bool {
		cur, err := c.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, old.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || err == nil && cur.UID != old.UID
	})
}

// wipeMember makes member lose its data, as an operator replaces a broken
// member's volume: its claim is deleted, then its pod (gracefully: a
// leader hands over), and the volume is emptied (emptyVolume).
func (c *cluster) wipeMember(ctx context.Context, member string) error {
	old, err := c.deleteClaim(ctx, member)
	if err != nil {
		return err
	}
	if err := c.client.CoreV1().Pods(namespace).Delete(ctx, member, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting pod %s: %w", member, err)
	}
	return c.emptyVolume(ctx, member, old)
}

// emptyVolume waits until member's deleted claim old is gone (once no pod
// uses it), then empties its volume and offers it again, to the claim the
// StatefulSet makes for the member's next pod, which starts empty.
func (c *cluster) emptyVolume(ctx context.Context, member string, old *corev1.PersistentVolumeClaim) error {
	if err := c.awaitClaimGone(ctx, old, 2*time.Minute); err != nil {
		return err
	}
	if err := c.deleteVolume(ctx, member); err != nil {
		return err
	}
	return c.createVolume(ctx, member)
}

// wipeVolumes empties every member's volume once its pod is gone.
func (c *cluster) wipeVolumes(ctx context.Context) error {
	for _, m := range members {
		old, err := c.deleteClaim(ctx, m)
		if err == nil {
			err = c.emptyVolume(ctx, m, old)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// poll checks cond every 250 ms until it holds, for at most timeout.
func poll(timeout time.Duration, what string, cond func() bool) error {
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s", timeout, what)
		}
	}
	return nil
}
